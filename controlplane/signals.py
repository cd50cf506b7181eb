"""What follows a write, kept out of the models: the models announce their changes with Django
signals, and these receivers, connected in `ControlPlaneConfig.ready` (as NetBox's apps connect
theirs), do the work that belongs to the services. So the models import no service and no task.

- New events queue their webhook deliveries (`services/notifications.enqueue`) in the writer's
  transaction: a rolled-back write queues nothing, a committed job event always has its rows.
- A price rate added, corrected, moved or removed after the hours it prices were rolled has the
  rollups repriced from the earliest instant it affects, for the GPU types and tiers it touches
  (`services/accounting.reprice`), by a Celery task queued when the change commits (API, admin,
  shell alike); without a broker (the demo) the task runs at once, after the commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import structlog
from django.db import models, transaction
from django.db.models.signals import post_delete, post_save, pre_save
from django.dispatch import receiver

from controlplane.models import Event, PriceRate
from controlplane.models.events import events_written
from controlplane.services import notifications
from controlplane.tasks_accounting import reprice_rollups

log = structlog.get_logger(__name__)


@receiver(events_written, sender=Event, dispatch_uid="qm-events-queue-notifications")
def queue_notifications(sender: type[Event], events: Sequence[Event], **kwargs: Any) -> None:
    notifications.enqueue(events)


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
