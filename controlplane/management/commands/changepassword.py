"""`manage.py changepassword [USER]`: Django's command, its change recorded in the audit trail.

A password set on the admin's pages is a `UserPasswordChanged` event (services/config_audit.py);
set here it left nothing until 6 Dec, though this is how an operator locked out gets back in.
Since 7 Dec every password change is recorded by the user's save (services/config_audit.py,
password_saved); this command says who made it: `manage.py:<OS user>` and the command.
This app comes before django.contrib.auth in INSTALLED_APPS, so this command is the one run.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.management.commands import changepassword

from controlplane.services import config_audit


class Command(changepassword.Command):
    help = ("Change a user's password (django.contrib.auth's command), recorded as a UserPasswordChanged event "
            "whose actor is manage.py and the OS user who ran it; never the password.")

    def handle(self, *args: Any, **options: Any) -> str | None:
        command = config_audit.CommandLine("changepassword")
        # The prompts run inside the recording's transaction, as the admin's pages run inside
        # theirs: the password and its event (written by the user's save, naming this command)
        # are written together or not at all.
        answer: str | None = config_audit.password_change_recorded(
            command.actor, lambda: super(Command, self).handle(*args, **options), command=command)
        return answer
