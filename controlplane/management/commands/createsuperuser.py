"""`manage.py createsuperuser`: Django's command, the user it makes recorded in the audit trail.

Every user created is a `UserCreated` event, by the user's save (services/config_audit.py,
user_saved); the superuser made here, an admin of the whole fleet (services/access.py), left
nothing until 6 Dec, and until 7 Dec was recorded by this command alone. This command says who
made it: `manage.py:<OS user>` and the command.
This app comes before django.contrib.auth in INSTALLED_APPS, so this command is the one run.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.management.commands import createsuperuser

from controlplane.services import config_audit


class Command(createsuperuser.Command):
    help = ("Create a superuser (django.contrib.auth's command), recorded as a UserCreated event whose actor is "
            "manage.py and the OS user who ran it; never the password.")

    def handle(self, *args: Any, **options: Any) -> None:
        command = config_audit.CommandLine("createsuperuser")
        # The prompts run inside the recording's transaction: the user and its event are
        # written together or not at all.
        with config_audit.changing_users(command.actor, command):
            super().handle(*args, **options)
