"""Fleet capacity counts a node only while it is in the fleet.

QA saw `GET /api/v1/metrics/utilization/` show 144 GPUs of capacity from 23:15 on a fleet that
had 128 until two simulated agents registered at 23:20:24: each rollup rewrote its trailing
minutes with the nodes registered *now*. A node counts from its registration (the agent's
`node.registered` event, or the `NodeCreated` audit event of the API and admin) and, once
deleted, until its `NodeDeleted` event; a node with neither (seeded, or older than the events
kept) counts as before.

Fleet: one H100 node of 8 GPUs (reserved, $2.50/GPU-h) from the start.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Sum

from controlplane.models import FleetRollup, Node
from controlplane.services import accounting
from controlplane.services.config_audit import config_record, record_config_change
from tests.controlplane.accounting.builders import T0, h100, minutes, node
from tests.controlplane.loop_fixtures import BOOTSTRAP, register_node

pytestmark = pytest.mark.django_db
SECONDS = timedelta(seconds=1)


@pytest.fixture(autouse=True)
def _bootstrap(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


def capacity_by_minute() -> dict[int, Decimal]:
    """Capacity GPU-seconds of each minute row, keyed by minutes after T0."""
    rows = (
        FleetRollup.objects.filter(bucket=accounting.MINUTE)
        .values("start").annotate(c=Sum("capacity_gpu_seconds")).order_by("start")
    )
    return {int((r["start"] - T0).total_seconds() // 60): r["c"] for r in rows}


def roll_every_15s(until: timedelta, start: timedelta = 15 * SECONDS) -> None:
    t = start
    while t <= until:
        accounting.roll_up(T0 + t)
        t += 15 * SECONDS


def test_a_node_registered_at_05_24_counts_from_05_24_not_from_the_rollups_trailing_minutes() -> None:
    gpu = h100()
    node(gpu)
    roll_every_15s(minutes(5) + 15 * SECONDS)
    register_node("sim-new", now=T0 + minutes(5) + 24 * SECONDS, capacity_tier="reserved")
    roll_every_15s(minutes(8), start=minutes(5) + 30 * SECONDS)
    capacity = capacity_by_minute()
    for m in range(5):
        assert capacity[m] == Decimal(8 * 60), f"minute {m} shows a node that had not registered yet"
    assert capacity[5] == Decimal(8 * 60 + 8 * 36)  # the new node from 10:05:24
    assert capacity[6] == capacity[7] == Decimal(16 * 60)
    cost = FleetRollup.objects.filter(bucket=accounting.MINUTE, start=T0 + minutes(5)).aggregate(
        c=Sum("capacity_cost_usd"))["c"]
    assert cost.quantize(Decimal("0.000001")) == (Decimal(16 * 60 - 8 * 24) * Decimal("2.5") / 3600).quantize(
        Decimal("0.000001"))
    hours = FleetRollup.objects.filter(bucket=accounting.HOUR).aggregate(c=Sum("capacity_gpu_seconds"))["c"]
    assert hours == Decimal(8 * 8 * 60 + 8 * (2 * 60 + 36))


def test_a_node_created_through_the_api_counts_from_its_creation() -> None:
    gpu = h100()
    node(gpu)
    roll_every_15s(minutes(3))
    added = node(gpu, name="api-node", gpus=4)
    # The API's and the admin's create record this event in the same transaction (config_audit).
    event = record_config_change(added, "created", None, "user:admin")
    assert event is not None
    event.created_at = T0 + minutes(3) + 10 * SECONDS
    event.save(update_fields=["created_at"])
    roll_every_15s(minutes(5), start=minutes(3) + 15 * SECONDS)
    capacity = capacity_by_minute()
    assert capacity[0] == capacity[1] == capacity[2] == Decimal(8 * 60)
    assert capacity[3] == Decimal(8 * 60 + 4 * 50)
    assert capacity[4] == Decimal(12 * 60)


def test_a_deleted_node_counts_until_its_deletion() -> None:
    """Consistent with a join: removing a node does not take it out of the minutes before."""
    gpu = h100()
    node(gpu)
    doomed = node(gpu, name="doomed", gpus=4)
    roll_every_15s(minutes(3))
    event = record_config_change(doomed, "deleted", config_record(doomed), "user:admin")
    assert event is not None
    Node.objects.filter(pk=doomed.pk).delete()
    event.created_at = T0 + minutes(3) + 40 * SECONDS
    event.save(update_fields=["created_at"])
    roll_every_15s(minutes(5), start=minutes(3) + 15 * SECONDS)
    capacity = capacity_by_minute()
    assert capacity[0] == capacity[1] == capacity[2] == Decimal(12 * 60)
    assert capacity[3] == Decimal(8 * 60 + 4 * 40)
    assert capacity[4] == Decimal(8 * 60)
