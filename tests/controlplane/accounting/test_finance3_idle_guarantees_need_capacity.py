"""Finance QA, round 3 (2 Dec): idle reserved quota counted guarantees while the fleet had no
GPUs of their type. On the demo the first rolled minute began 20 seconds before the nodes
registered: the capacity rows (and `__idle__`) started at the registrations, the teams'
guarantees at the start of the minute, so the page read "guarantees idle for 1.5 GPU-h … the
idle H100-80GB capacity (1.0 GPU-h)" for the same 72 idle GPUs, $1.31 of idle reserved quota
for GPUs that did not exist yet, in every window containing that minute. The guarantee sweep
now sees the fleet the capacity rows count (each node from when it joined, until it left) and a
guarantee counts only while its GPU type has capacity.

Team ml is guaranteed 8 H100 GPUs (reserved, $2.50/GPU-h) and runs nothing; the fleet is one
node of 8 H100 GPUs, so every idle guaranteed GPU-second is an idle GPU-second of `__idle__`.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db.models import Sum

from controlplane.models import QuotaRollup
from controlplane.services import accounting, nodes, showback
from controlplane.services.access import Access
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, minutes, node
from tests.controlplane.loop_fixtures import BOOTSTRAP, register_node

pytestmark = pytest.mark.django_db
FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())
SECOND = timedelta(seconds=1)


@pytest.fixture(autouse=True)
def _bootstrap(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


def roll_every_15s(until: timedelta) -> None:
    t = 15 * SECOND
    while t <= until:
        accounting.roll_up(T0 + t)
        t += 15 * SECOND


def idle_by_minute() -> dict[int, Decimal]:
    rows = (QuotaRollup.objects.filter(bucket=accounting.MINUTE).values("start")
            .annotate(idle=Sum("idle_gpu_seconds")).order_by("start"))
    return {int((r["start"] - T0).total_seconds() // 60): r["idle"] for r in rows}


def test_guarantees_are_not_idle_before_the_first_node_of_their_type_registers() -> None:
    gpu = h100()
    f.make_quota(f.make_team("ml"), gpu, 8)
    register_node("sim-h100", now=T0 + 20 * SECOND, capacity_tier="reserved")
    roll_every_15s(minutes(3))

    idle = idle_by_minute()
    assert idle[0] == Decimal(8 * 40)  # from 10:00:20, not 480 from 10:00:00
    assert idle[1] == idle[2] == Decimal(8 * 60)
    row = QuotaRollup.objects.get(bucket=accounting.MINUTE, start=T0)
    assert row.nominal_gpu_seconds == row.used_gpu_seconds + row.lent_gpu_seconds + row.idle_gpu_seconds

    now = T0 + minutes(3)
    report = showback.showback(showback.Window(T0, now, "3m"), "team", FINANCE, now)
    assert report.idle is not None
    # The same idle GPUs, read twice: as the team's idle guarantee and as the fleet's __idle__.
    assert report.idle_reserved_gpu_seconds_total == report.idle.idle_gpu_seconds == Decimal(8 * 160)
    assert report.idle_reserved_usd_total.quantize(Decimal("0.000001")) == \
        report.idle.cost_usd.quantize(Decimal("0.000001")) == (Decimal(8 * 160) * Decimal("2.5") / 3600).quantize(
            Decimal("0.000001"))


def test_guarantees_stop_idling_when_the_last_node_of_their_type_is_retired() -> None:
    gpu = h100()
    only = node(gpu, name="only")
    f.make_quota(f.make_team("ml"), gpu, 8)
    admin = f.make_user("root", role="admin")
    nodes.retire(only, admin, now=T0 + minutes(1) + 30 * SECOND)
    roll_every_15s(minutes(3))

    idle = idle_by_minute()
    assert idle[0] == Decimal(8 * 60)
    assert idle[1] == Decimal(8 * 30)  # until 10:01:30
    assert 2 not in idle  # nothing guaranteed, used or idle: no row at all (see below)


def test_a_guarantee_on_a_type_with_no_gpus_writes_no_rows() -> None:
    """Until 6 Dec every quota wrote a row a minute, all zeros while the fleet had no GPUs of its
    type; those rows were PROTECT history, so a GPU type once given a quota and never a node
    could not be deleted, even with the quota gone (tests/controlplane/test_admin_delete_with_history.py)."""
    gpu = h100()
    node(gpu)
    b200 = f.make_gpu_type("B200", 192)
    ml = f.make_team("ml")
    f.make_quota(ml, gpu, 8)
    f.make_quota(ml, b200, 8)
    roll_every_15s(minutes(3))

    assert not QuotaRollup.objects.filter(gpu_type=b200).exists()
    assert QuotaRollup.objects.filter(gpu_type=gpu, bucket=accounting.MINUTE).count() == 3
