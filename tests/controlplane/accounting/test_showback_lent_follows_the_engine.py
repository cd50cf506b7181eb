"""The showback's idle reserved quota counts lent as the engine charges it, the way the live
"lent" figure does (quotas.lent_now: the teams page, the admin, the API's `lent_gpus`):
scheduler_core's QuotaLedger admits a team's GPUs above its nominal only against what its
cohort's other teams lend, whatever the fleet holds beyond the guarantees, so every GPU a team of
a cohort borrows is lent by its cohort's teams with unused quota.

Until 7 Dec the rollup's minute-by-minute sweep let borrowers run first on capacity nobody is
guaranteed: with 24 H100 GPUs for guarantees of 8 + 8, ml borrowing 4 read as lent by nobody,
and vision's whole unused guarantee as idle reserved quota (8 GPU-hours, $20.00 an hour), while
the teams page said vision lent 4 all along.

Fleet: three nodes of 8 H100 GPUs ($2.50/GPU-h reserved); ml and vision, one cohort, each
guaranteed 8. ml runs 12 GPUs 10:00-10:30 (4 borrowed), then 10 GPUs 10:30-11:00 (2 borrowed)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db.models import Sum

from controlplane.choices import AllocationState
from controlplane.models import Allocation, AllocationGpu, QuotaRollup
from controlplane.services import accounting, quotas, showback
from controlplane.services.access import Access
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, running_job

pytestmark = pytest.mark.django_db
FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())


def _release(allocation: Allocation, at: object) -> None:
    Allocation.objects.filter(pk=allocation.pk).update(state=AllocationState.RELEASED, released_at=at)
    AllocationGpu.objects.filter(allocation=allocation).update(live=False)


def test_the_showback_counts_lent_and_idle_reserved_as_the_live_lent_figure_said_minute_by_minute() -> None:
    gpu = h100()
    a, b, c = node(gpu), node(gpu), node(gpu)
    cohort = f.make_cohort("shared")
    ml, vision = f.make_team("ml", cohort=cohort), f.make_team("vision", cohort=cohort)
    f.make_quota(ml, gpu, 8)
    f.make_quota(vision, gpu, 8)

    # 10:00-10:30: ml holds 12, and the live figure says vision lends 4.
    first = hold(running_job(ml, gpus=12, started_at=T0, borrowed=True), [(a, 8), (b, 4)], T0, borrowed=True)
    live_first = quotas.lent_now()[(vision.pk, gpu.pk)]
    # 10:30-11:00: ml holds 10, and the live figure says vision lends 2.
    _release(first, T0 + minutes(30))
    hold(running_job(ml, gpus=10, started_at=T0 + minutes(30), borrowed=True), [(b, 8), (c, 2)],
         T0 + minutes(30), borrowed=True)
    live_second = quotas.lent_now()[(vision.pk, gpu.pk)]
    assert (live_first, live_second) == (4.0, 2.0)

    now = T0 + minutes(60)
    accounting.catch_up(now)

    # Minute by minute, the stored rows say what the live figure said then.
    rows = {int((r.start - T0).total_seconds() // 60): r
            for r in QuotaRollup.objects.filter(bucket=accounting.MINUTE, team=vision, start__lt=now)}
    assert sorted(rows) == list(range(60))
    for minute, row in rows.items():
        lent_now = live_first if minute < 30 else live_second
        assert (minute, row.lent_gpu_seconds) == (minute, Decimal(int(lent_now) * 60))
        assert (minute, row.idle_gpu_seconds) == (minute, Decimal((8 - int(lent_now)) * 60))

    # Over the window: vision lent 4 × 0.5 h + 2 × 0.5 h = 3 GPU-hours, and 5 sat idle ($12.50).
    lent = QuotaRollup.objects.filter(bucket=accounting.HOUR, team=vision).aggregate(s=Sum("lent_gpu_seconds"))["s"]
    assert lent == Decimal(3 * 3600)
    entries = {e.name: e for e in showback.showback(showback.Window(T0, now, "1h"), "team", FINANCE, now).entries}
    assert entries["vision"].idle_reserved_gpu_seconds == Decimal(5 * 3600)
    assert entries["vision"].idle_reserved_usd.quantize(Decimal("0.01")) == Decimal("12.50")
    # ml used its whole guarantee throughout: none of it idle, whatever it borrowed.
    assert entries["ml"].idle_reserved_gpu_seconds == 0


def test_borrowing_is_lent_by_the_cohort_with_unguaranteed_gpus_in_the_fleet_and_not_by_a_team_outside_it() -> None:
    """With GPUs nobody is guaranteed in the fleet, ml's 4 above nominal are still lent by
    vision, its cohort's team with unused quota, as the engine charges them; loner, in no
    cohort, lends nothing: its unused guarantee is idle reserved quota."""
    gpu = h100()
    a = node(gpu)
    node(gpu), node(gpu)  # 24 H100 GPUs for guarantees of 16: 8 nobody is guaranteed
    cohort = f.make_cohort("shared")
    ml, vision = f.make_team("ml", cohort=cohort), f.make_team("vision", cohort=cohort)
    loner = f.make_team("loner")
    f.make_quota(ml, gpu, 4)
    f.make_quota(vision, gpu, 4)
    f.make_quota(loner, gpu, 8)
    hold(running_job(ml, gpus=8, started_at=T0, borrowed=True), [(a, 8)], T0, borrowed=True)
    assert quotas.lent_now()[(vision.pk, gpu.pk)] == 4.0
    assert quotas.lent_now()[(loner.pk, gpu.pk)] == 0.0

    now = T0 + minutes(60)
    accounting.catch_up(now)
    hour = {r["team__name"]: r for r in QuotaRollup.objects.filter(bucket=accounting.HOUR, start=T0).values(
        "team__name", "lent_gpu_seconds", "idle_gpu_seconds")}
    assert (hour["vision"]["lent_gpu_seconds"], hour["vision"]["idle_gpu_seconds"]) == (Decimal(4 * 3600), 0)
    assert (hour["loner"]["lent_gpu_seconds"], hour["loner"]["idle_gpu_seconds"]) == (0, Decimal(8 * 3600))


def test_a_split_between_lenders_with_a_lending_limit_is_the_live_figure_s_to_the_microsecond() -> None:
    """ml (nominal 2) holds 8 of 32 H100 GPUs guaranteed 2 + 10 + 10: its 6 above nominal are
    lent by vision (10 unused, lending limit 4) and audio (10 unused) in proportion to what each
    may lend, 4 : 10, shares that are no whole GPU; each minute row holds the live shares × 60 s."""
    gpu = h100()
    a = node(gpu)
    node(gpu), node(gpu), node(gpu)
    cohort = f.make_cohort("shared")
    ml, vision, audio = (f.make_team(name, cohort=cohort) for name in ("ml", "vision", "audio"))
    f.make_quota(ml, gpu, 2)
    f.make_quota(vision, gpu, 10, lending_limit=4)
    f.make_quota(audio, gpu, 10)
    hold(running_job(ml, gpus=8, started_at=T0, borrowed=True), [(a, 8)], T0, borrowed=True)
    live = quotas.lent_now()
    assert live[(vision.pk, gpu.pk)] + live[(audio.pk, gpu.pk)] == pytest.approx(6.0)

    accounting.catch_up(T0 + minutes(10))
    for team in (vision, audio):
        rows = QuotaRollup.objects.filter(bucket=accounting.MINUTE, team=team, start__lt=T0 + minutes(10))
        assert rows.count() == 10
        for row in rows:
            assert float(row.lent_gpu_seconds) == pytest.approx(live[(team.pk, gpu.pk)] * 60, abs=1e-5)
            assert row.nominal_gpu_seconds == row.used_gpu_seconds + row.lent_gpu_seconds + row.idle_gpu_seconds
