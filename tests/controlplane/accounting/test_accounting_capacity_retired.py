"""A retired node's capacity and idle cost end at its retirement; before it, they still count.

Before, a node "retired" by the documented workaround (moved to a pool of its own) kept its
GPUs in the fleet's capacity, so finance's idle cost ($ of GPUs no job held) grew by a node
nobody could use. Now `retired_at` ends its capacity (services/accounting._fleet_spans) and the
capacity under the teams' idle guarantees, and returning it to service starts them again.

Fleet: node "keep" (8 H100, reserved, $2.50/GPU-h) and node "old" (4 H100), both from the
start (T0 = 10:00, a job runs on "keep" from T0 so the accounting starts there).
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from controlplane.models import FleetRollup, QuotaRollup
from controlplane.services import accounting, nodes, quotas, showback
from controlplane.services.access import Access
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, report, running_job

pytestmark = pytest.mark.django_db
FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())
CENT = Decimal("0.01")


def capacity_by_minute() -> dict[int, Decimal]:
    rows = (FleetRollup.objects.filter(bucket=accounting.MINUTE)
            .values("start").annotate(c=Sum("capacity_gpu_seconds")).order_by("start"))
    return {int((r["start"] - T0).total_seconds() // 60): r["c"] for r in rows}


def roll_every_15s(until: timedelta, start: timedelta = timedelta(seconds=15)) -> None:
    t = start
    while t <= until:
        accounting.roll_up(T0 + t)
        t += timedelta(seconds=15)


@pytest.fixture
def fleet() -> dict[str, object]:
    gpu = h100()
    keep, old = node(gpu, name="keep"), node(gpu, name="old", gpus=4)
    admin = f.make_user("root", role="admin")
    job = running_job(f.make_team("ml"), gpus=2, started_at=T0)
    allocation = hold(job, [(keep, 2)], T0)
    return {"keep": keep, "old": old, "admin": admin, "allocation": allocation}


def test_capacity_counts_a_retired_node_until_retired_at_and_not_after(fleet) -> None:
    roll_every_15s(minutes(3))
    nodes.retire(fleet["old"], fleet["admin"], now=T0 + minutes(3) + timedelta(seconds=20))
    roll_every_15s(minutes(6), start=minutes(3) + timedelta(seconds=15))

    capacity = capacity_by_minute()
    assert capacity[0] == capacity[1] == capacity[2] == Decimal(12 * 60)
    assert capacity[3] == Decimal(8 * 60 + 4 * 20)  # "old" until 10:03:20
    assert capacity[4] == capacity[5] == Decimal(8 * 60)


def test_showback_of_a_window_spanning_the_retirement_counts_the_capacity_before_it(fleet) -> None:
    """First rollup only after the retirement (a backlog): the minutes before it still count
    "old". Window 10:00–10:06, retired at 10:02: capacity 12 GPUs × 2 min + 8 × 4 min = 56
    GPU-min = 3,360 GPU-s ($2.3333); the job held 2 GPUs × 6 min = 720 GPU-s, so idle is 2,640
    GPU-s ($1.8333). Before: 12 × 6 min = 4,320 GPU-s of capacity, idle 3,600 ($2.50)."""
    nodes.retire(fleet["old"], fleet["admin"], now=T0 + minutes(2))
    now = T0 + minutes(6)
    report(fleet["allocation"], fleet["keep"], T0, now)
    accounting.catch_up(now)

    result = showback.showback(showback.Window(T0, now, "6m"), "team", FINANCE, now)

    assert result.capacity_gpu_seconds == Decimal(12 * 120 + 8 * 240)
    assert result.idle is not None
    assert result.idle.idle_gpu_seconds == Decimal(12 * 120 + 8 * 240 - 2 * 360)
    assert result.idle.cost_usd.quantize(CENT) == (Decimal(2640) * Decimal("2.5") / 3600).quantize(CENT)
    # A window wholly after the retirement does not see "old" at all.
    later = showback.showback(showback.Window(T0 + minutes(3), now, "3m"), "team", FINANCE, now)
    assert later.capacity_gpu_seconds == Decimal(8 * 180)


def test_a_node_returned_to_service_counts_again_from_its_return(fleet) -> None:
    nodes.retire(fleet["old"], fleet["admin"], now=T0 + minutes(1))
    nodes.return_to_service(fleet["old"], fleet["admin"], now=T0 + minutes(3) + timedelta(seconds=30))
    accounting.catch_up(T0 + minutes(5))

    capacity = capacity_by_minute()
    assert capacity[0] == Decimal(12 * 60)
    assert capacity[1] == capacity[2] == Decimal(8 * 60)
    assert capacity[3] == Decimal(8 * 60 + 4 * 30)
    assert capacity[4] == Decimal(12 * 60)


def test_idle_guarantees_lend_as_the_engine_charges_before_and_after_a_retirement(fleet) -> None:
    """Team ml is guaranteed 8 H100s and holds 2 (on "keep"); team vision (same cohort,
    guarantee 0) borrows 4 (on "keep" too). The engine admits vision's 4 only against ml's unused
    guarantee, whatever the fleet holds beyond the guarantees: ml lends 4 and idles 2, with "old"
    in the fleet (12 GPUs, 8 guaranteed) and once it is retired at 10:02 (8 GPUs) alike, as the
    live figure says (quotas.lent_now). Until 7 Dec the sweep let vision's 4 run first on the 4
    GPUs of "old" nobody is guaranteed: ml lent nothing and idled 6 until the retirement."""
    gpu = fleet["keep"].gpu_type
    cohort = f.make_cohort("all")
    ml = fleet["allocation"].job.team
    ml.cohort = cohort
    ml.save()
    vision = f.make_team("vision", cohort=cohort)
    f.make_quota(ml, gpu, 8)
    f.make_quota(vision, gpu, 0)
    borrower = running_job(vision, gpus=4, started_at=T0)
    hold(borrower, [(fleet["keep"], 4)], T0, first_index=2, borrowed=True)
    assert quotas.lent_now()[(ml.pk, gpu.pk)] == 4.0
    nodes.retire(fleet["old"], fleet["admin"], now=T0 + minutes(2))
    accounting.catch_up(T0 + minutes(4))

    rows = {int((r["start"] - T0).total_seconds() // 60): (r["lent_gpu_seconds"], r["idle_gpu_seconds"]) for r in
            QuotaRollup.objects.filter(bucket=accounting.MINUTE, team=ml).values("start", "lent_gpu_seconds",
                                                                                  "idle_gpu_seconds")}
    assert [rows[m] for m in range(4)] == [(Decimal(4 * 60), Decimal(2 * 60))] * 4
