"""What follows a write, kept out of the models: the models announce their changes with Django
signals, and these receivers, connected in `ControlPlaneConfig.ready` (as NetBox's apps connect
theirs), do the work that belongs to the services. So the models import no service and no task.

- New events queue their webhook deliveries (`services/notifications.enqueue`) in the writer's
  transaction: a rolled-back write queues nothing, a committed job event always has its rows.
- A price rate added, corrected, moved or removed after the hours it prices were rolled has the
  rollups repriced from the earliest instant it affects, for the GPU types and tiers it touches
  (`services/accounting.reprice`), by a Celery task queued when the change commits (API, admin,
  shell alike); without a broker (the demo) the task runs at once, after the commit.
- A user's password set anew revokes their API tokens (`services/api_tokens.password_changed`).
  A user created, changed in who they are or what they may do (their groups and permissions
  too, changed from either side), given a password or deleted, by whatever path, is one event each (`UserCreated`, `UserChanged`, `UserPasswordChanged`,
  `UserDeleted`, and a `job.updated` on each job the deleted user submitted or held and a
  `MaintenanceWindowChanged` on each window they created or cancelled, which lose them, an
  `ApiTokenOwnerDeleted` on each API token, which goes with them:
  `services/config_audit.user_saved`, `user_deleted`, which records nothing more for users the
  admin's "Delete selected users" recorded together, `users_deleting`; the user as stored before
  the save read at pre_save).
- A failed sign-in (the API's token request, the pages' and the admin's forms: Django's
  `user_login_failed`) counts against its username (`api/throttling.sign_in_failed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_login_failed
from django.db import models, transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver

from controlplane.api.throttling import sign_in_failed
from controlplane.models import Event, PriceRate
from controlplane.models.events import events_written
from controlplane.services import api_tokens, config_audit, notifications
from controlplane.tasks_accounting import reprice_rollups

log = structlog.get_logger(__name__)


@receiver(events_written, sender=Event, dispatch_uid="qm-events-queue-notifications")
def queue_notifications(sender: type[Event], events: Sequence[Event], **kwargs: Any) -> None:
    notifications.enqueue(events)


@receiver(user_login_failed, dispatch_uid="qm-sign-in-failed-count-per-username")
def count_failed_sign_in(sender: Any, credentials: dict[str, Any], **kwargs: Any) -> None:
    username = credentials.get(get_user_model().USERNAME_FIELD, credentials.get("username"))
    if isinstance(username, str) and username:
        sign_in_failed(username)


@receiver(post_save, sender=get_user_model(), dispatch_uid="qm-user-password-changed-revoke-token")
def revoke_token_after_password_change(sender: type[models.Model], instance: Any, created: bool = False,
                                       **kwargs: Any) -> None:
    """Django keeps the raw password on the user from set_password until its save has run
    (AbstractBaseUser.save, after this signal) and clears it first when it only upgrades the
    stored hash at a sign-in: set here means the password changed. A password made unusable
    (the admin's "password-based authentication: disabled") ends the token too."""
    if created or kwargs.get("raw"):
        return
    fields = kwargs.get("update_fields")
    if fields is not None and "password" not in fields:
        return  # the sign-in's last_login, a rename: no password written
    if getattr(instance, "_password", None) is not None or not instance.has_usable_password():
        api_tokens.password_changed(instance)


@receiver(pre_save, sender=get_user_model(), dispatch_uid="qm-user-remember-stored")
def remember_stored_user(sender: type[models.Model], instance: Any, raw: bool = False,
                         update_fields: Any = None, **kwargs: Any) -> None:
    instance._qm_stored_user = config_audit.stored_user(instance, update_fields, raw)


@receiver(post_save, sender=get_user_model(), dispatch_uid="qm-user-saved-record")
def record_user_save(sender: type[models.Model], instance: Any, created: bool = False, raw: bool = False,
                     **kwargs: Any) -> None:
    """Whatever saved it (a page, a command, `manage.py shell`): one event per user created, per
    change of who they are or what they may do, per change of the stored password (Django
    clears the raw one only after this signal)."""
    before = getattr(instance, "_qm_stored_user", None)
    instance._qm_stored_user = None
    if not raw:  # loaddata
        config_audit.user_saved(instance, created, before)


@receiver(pre_delete, sender=get_user_model(), dispatch_uid="qm-user-deleted-record")
def record_user_delete(sender: type[models.Model], instance: Any, **kwargs: Any) -> None:
    """Before the delete (a page's, a queryset's in a shell), while the memberships that go with
    the user are still there to be recorded."""
    config_audit.user_deleted(instance)


@receiver(m2m_changed, sender=get_user_model().groups.through, dispatch_uid="qm-user-groups-changed-record")
@receiver(m2m_changed, sender=get_user_model().user_permissions.through,
          dispatch_uid="qm-user-permissions-changed-record")
def record_user_access_change(sender: type[models.Model], instance: Any, action: str, reverse: bool,
                              pk_set: Any, using: str, **kwargs: Any) -> None:
    """A user's groups or permissions, changed from either side (`bob.groups.add(ops)`,
    `ops.user_set.add(bob)`, `bob.groups.set([ops])`, the user's admin page): what they may
    change on the admin's pages."""
    config_audit.users_access_changing(action, instance, reverse, pk_set)
    config_audit.users_access_changed(action, instance, sender, using)


@receiver(pre_save, sender=PriceRate, dispatch_uid="qm-price-rate-remember-previous")
def remember_previous_rate(sender: type[models.Model], instance: Any, **kwargs: Any) -> None:
    """The rate's GPU type, tier and start before this save: moving a rate reprices from the
    earlier of its old and new starts, for both its old and new keys."""
    instance._qm_previous_rate = (
        sender.objects.filter(pk=instance.pk).values_list("gpu_type_id", "capacity_tier", "effective_from").first()
        if instance.pk else None
    )


@receiver(post_save, sender=PriceRate, dispatch_uid="qm-price-rate-saved-reprice")
@receiver(post_delete, sender=PriceRate, dispatch_uid="qm-price-rate-deleted-reprice")
def reprice_after_rate_change(sender: type[models.Model], instance: Any, **kwargs: Any) -> None:
    if kwargs.get("raw"):
        return  # loaddata
    since = instance.effective_from
    keys = [[instance.gpu_type_id, str(instance.capacity_tier)]]
    previous = getattr(instance, "_qm_previous_rate", None)
    if previous is not None:
        keys.append([previous[0], str(previous[1])])
        since = min(since, previous[2])
    since_text = since.isoformat()

    def queue() -> None:
        try:
            reprice_rollups.delay(since_text, keys)
        except Exception:  # the rate is saved; say how to apply it rather than fail the request
            log.exception(
                "price change not repriced", since=since_text, keys=keys,
                hint="run controlplane.services.accounting.reprice(since, now) once the broker is back",
            )

    transaction.on_commit(queue)
