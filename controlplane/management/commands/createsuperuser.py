"""`manage.py createsuperuser`: Django's command, the user it makes recorded in the audit trail.

A user added on the admin's pages is a `UserCreated` event (services/config_audit.py); the
superuser made here, an admin of the whole fleet (services/access.py), left nothing until 6 Dec.
This app comes before django.contrib.auth in INSTALLED_APPS, so this command is the one run.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.management.commands import createsuperuser
from django.db import transaction
from django.db.models.signals import post_save

from controlplane.services import config_audit


class Command(createsuperuser.Command):
    help = ("Create a superuser (django.contrib.auth's command), recorded as a UserCreated event whose actor is "
            "manage.py and the OS user who ran it; never the password.")

    def handle(self, *args: Any, **options: Any) -> None:
        command = config_audit.CommandLine("createsuperuser")
        made: list[Any] = []

        def remember(sender: Any, instance: Any, created: bool = False, **kwargs: Any) -> None:
            if created:
                made.append(instance)

        # Django's command returns nothing and saves the user in its manager: the user this
        # process creates is caught as it is saved, and recorded in the same transaction.
        uid = f"qm-createsuperuser-{id(made)}"
        post_save.connect(remember, sender=get_user_model(), weak=False, dispatch_uid=uid)
        try:
            with transaction.atomic(using=options["database"]):
                super().handle(*args, **options)
                for user in made:
                    config_audit.record_config_change(user, "created", None, command.actor, why=command.said)
        finally:
            post_save.disconnect(sender=get_user_model(), dispatch_uid=uid)
