"""`manage.py changepassword [USER]`: Django's command, its change recorded in the audit trail.

A password set on the admin's pages is a `UserPasswordChanged` event (services/config_audit.py);
set here it left nothing until 6 Dec, though this is how an operator locked out gets back in.
This app comes before django.contrib.auth in INSTALLED_APPS, so this command is the one run.
"""

from __future__ import annotations

import getpass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import changepassword

from controlplane.services import config_audit


class Command(changepassword.Command):
    help = ("Change a user's password (django.contrib.auth's command), recorded as a UserPasswordChanged event "
            "whose actor is manage.py and the OS user who ran it; never the password.")

    def handle(self, *args: Any, **options: Any) -> str | None:
        model = get_user_model()
        username = options["username"] or getpass.getuser()  # Django's own default: the OS user's name
        user_id = (model._default_manager.using(options["database"])
                   .filter(**{model.USERNAME_FIELD: username}).values_list("pk", flat=True).first())
        if user_id is None:
            return super().handle(*args, **options)  # Django's "user '…' does not exist"
        command = config_audit.CommandLine("changepassword")
        # The prompts run inside the recording's transaction, as the admin's pages run inside
        # theirs: the password and its event are written together or not at all.
        answer: str | None = config_audit.password_change_recorded(
            user_id, command.actor, lambda: super(Command, self).handle(*args, **options), command=command)
        return answer
