from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import models
from django.dispatch import Signal

from controlplane.choices import EventKind

events_written = Signal()
"""Sent with ``events`` (the Event rows just inserted) by every ``create`` and ``bulk_create``
of Event, inside the writer's transaction. controlplane/signals.py queues the batch's webhook
deliveries on it; the model itself knows nothing of notifications."""


class EventQuerySet(models.QuerySet["Event"]):
    """Every Event is written through `create` or `bulk_create` (services/transitions.py's
    record_event and the bulk writers of binds, exits, cancels, dependencies, reasons): the one
    place that announces new events (`events_written`), in the writer's transaction, so job
    events queue their webhook notifications with them (controlplane/signals.py,
    services/notifications.enqueue: no query for a batch without a job event anyone can
    subscribe to, one to find the matching hooks otherwise, one more to queue deliveries)."""

    def create(self, **kwargs: Any) -> Event:
        event = super().create(**kwargs)
        events_written.send(sender=Event, events=[event])
        return event

    def bulk_create(self, objs: Iterable[Event], *args: Any, **kwargs: Any) -> list[Event]:
        events = super().bulk_create(objs, *args, **kwargs)
        events_written.send(sender=Event, events=events)
        return events


def actor_name(actor: str) -> str:
    """An event's actor as a sentence names it: "alice" for `user:alice` ("Cancelled by alice",
    "Requeued by alice"); other actors (`scheduler@epoch:4`, `agent:node-03`) as they are."""
    return actor.removeprefix("user:")


class Event(models.Model):
    """The audit trail: every state change of a job, allocation, node or quota — who, when, why."""

    objects = EventQuerySet.as_manager()

    created_at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=32, choices=EventKind.choices)
    actor = models.CharField(max_length=128, help_text="user:alice, scheduler@epoch:4, agent:node-03 …")
    reason = models.CharField(max_length=64, blank=True, help_text="PascalCase reason code")
    message = models.CharField(max_length=1000, blank=True)
    job = models.ForeignKey("controlplane.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="events")
    allocation = models.ForeignKey(
        "controlplane.Allocation", null=True, blank=True, on_delete=models.CASCADE, related_name="events"
    )
    # A deleted node or team leaves its events in the trail (their messages name it).
    node = models.ForeignKey("controlplane.Node", null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    team = models.ForeignKey("controlplane.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="events")
    epoch = models.BigIntegerField(null=True, blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["job", "created_at"]), models.Index(fields=["kind", "created_at"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.kind} by {self.actor}: {self.message}"
