"""Hand-computed accounting scenarios on real PostgreSQL, checked to the cent.

Every scenario states its fleet, what ran when, and works out the expected figures in the
docstring; the test rolls the raw rows up exactly as the Celery task does and reads the rollups.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db.models import Sum

from controlplane.choices import AllocationState, CapacityTier, EventKind, JobState
from controlplane.models import (
    Allocation,
    FleetRollup,
    GroupRollup,
    Job,
    JobProgressRate,
    PriceRate,
    QuotaRollup,
    UsageRollup,
    UsageSample,
)
from controlplane.services import accounting, showback, transitions
from controlplane.services.access import Access
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, report, running_job

pytestmark = pytest.mark.django_db
CENT = Decimal("0.01")
FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())


def totals(bucket: int = accounting.DAY, **filters: object) -> dict[str, Decimal]:
    sums = UsageRollup.objects.filter(bucket=bucket, **filters).aggregate(
        allocated=Sum("allocated_gpu_seconds"), active=Sum("active_gpu_seconds"),
        productive=Sum("productive_gpu_seconds"), lost=Sum("lost_gpu_seconds"), cost=Sum("cost_usd"),
        lost_cost=Sum("lost_cost_usd"), steps=Sum("steps"), retained=Sum("retained_steps"),
    )
    return {k: (v if v is not None else Decimal(0)) for k, v in sums.items()}


def assert_levels_agree() -> None:
    """Hours are the sums of their minutes and days of their hours, column by column."""
    fields = ["allocated_gpu_seconds", "active_gpu_seconds", "productive_gpu_seconds", "lost_gpu_seconds",
              "cost_usd", "lost_cost_usd"]
    for model in (UsageRollup, FleetRollup):
        levels = [model.objects.filter(bucket=b).aggregate(**{x: Sum(x) for x in fields})
                  for b in (accounting.MINUTE, accounting.HOUR, accounting.DAY)]
        assert levels[0] == levels[1] == levels[2], model.__name__
    groups = [GroupRollup.objects.filter(bucket=b).aggregate(**{x: Sum(x) for x in fields})
              for b in (accounting.DAY, accounting.MONTH)]
    assert groups[0] == groups[1] == levels[2]


def test_steady_job_three_tiers_and_cost() -> None:
    """8 H100 (reserved, $2.50/GPU-h) held 10:00–12:00, activity 0.75, 10 steps/s throughout.
    allocated = 8 × 7,200 s = 57,600 GPU-s = 16 GPU-h → $40.00; active = 0.75 × 57,600 = 43,200;
    every minute runs at the fault-free rate, so productive = active = 43,200 GPU-s."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0)
    allocation = hold(job, [(n, 8)], T0, T0 + minutes(120))
    report(allocation, n, T0, T0 + minutes(120))
    accounting.catch_up(T0 + minutes(180))
    t = totals()
    assert t["allocated"] == Decimal(57_600)
    assert t["active"] == Decimal(43_200)
    assert t["productive"] == Decimal(43_200)
    assert t["cost"].quantize(CENT) == Decimal("40.00")
    rate = JobProgressRate.objects.get(job=job)
    assert rate.steady and rate.unit == "steps"
    assert rate.per_active_gpu_second == pytest.approx(600 / 360)
    assert_levels_agree()


def test_fleet_allocated_plus_idle_is_capacity_times_time() -> None:
    """One node of 8 GPUs from 10:00 (first activity) to 13:00 = 24 GPU-h of capacity, $60.00;
    the job held 16 GPU-h ($40.00), so __idle__ is 8 GPU-h and $20.00."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0)
    report(hold(job, [(n, 8)], T0, T0 + minutes(120)), n, T0, T0 + minutes(120))
    now = T0 + minutes(180)
    accounting.catch_up(now)
    result = showback.showback(showback.Window(T0, now, "3h"), "team", FINANCE, now)
    assert result.capacity_gpu_seconds == Decimal(8 * 3 * 3600)
    assert result.idle is not None
    assert result.total.allocated_gpu_seconds + result.idle.idle_gpu_seconds == result.capacity_gpu_seconds
    assert result.idle.idle_gpu_seconds == Decimal(8 * 3600)
    assert result.idle.cost_usd.quantize(CENT) == Decimal("20.00")
    assert result.total.cost_usd.quantize(CENT) == result.capacity_cost_usd.quantize(CENT) == Decimal("60.00")


def test_preempted_job_loses_the_work_since_its_checkpoint() -> None:
    """8 GPUs bound at 10:00, checkpoint at 10:32, preempted (released) at 10:50; bound again
    11:00–12:00. 10 steps/s and activity 0.75 throughout.
    allocated = 8 × 110 min = 52,800 GPU-s → $36.67; lost = 8 × 18 min = 8,640 GPU-s = 2.4 GPU-h
    → preemption waste $6.00; retained steps = 10 × 92 min × 60 = 55,200; productive = the
    active time of the retained minutes = 0.75 × 8 × 92 × 60 = 33,120 GPU-s."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0, last_checkpoint_at=T0 + minutes(32))
    first = hold(job, [(n, 8)], T0)
    report(first, n, T0, T0 + minutes(50))
    assert transitions.signal_stop(first.pk, first.generation, reason=transitions.RELEASE_PREEMPTED, grace_period_s=30,
                                   at=T0 + minutes(49.5), actor="test", message="preempted")
    assert transitions.complete_release(first.pk, exit_code=None, at=T0 + minutes(50), actor="test")
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=T0 + minutes(60))
    second = hold(job, [(n, 8)], T0 + minutes(60), T0 + minutes(120))
    report(second, n, T0 + minutes(60), T0 + minutes(120))
    accounting.catch_up(T0 + minutes(180))
    t = totals()
    assert t["allocated"] == Decimal(52_800)
    assert t["cost"].quantize(CENT) == Decimal("36.67")
    assert t["lost"] == Decimal(8_640)
    assert t["lost_cost"].quantize(CENT) == Decimal("6.00")
    assert float(t["retained"]) == pytest.approx(55_200)
    assert t["productive"] == Decimal(33_120)
    job.refresh_from_db()
    assert Decimal(str(job.lost_gpu_seconds)) == t["lost"]  # the same loss the control loop recorded
    assert_levels_agree()


def test_preemption_reported_after_its_minutes_were_rolled_rewrites_them() -> None:
    """Rolled at 10:30 with everything retained; the job is preempted at 10:40 with its checkpoint
    at 10:10. The next run finds the requeue event and takes 10:10–10:40 back out of the
    retained and productive tiers: lost = 8 × 30 min = 14,400 GPU-s ($10.00)."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0, last_checkpoint_at=T0 + minutes(10))
    allocation = hold(job, [(n, 8)], T0)
    report(allocation, n, T0, T0 + minutes(30))
    accounting.catch_up(T0 + minutes(30))
    before = totals()
    assert before["lost"] == 0 and before["productive"] == before["active"]
    report(allocation, n, T0 + minutes(30), T0 + minutes(40))
    transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                            grace_period_s=30, at=T0 + minutes(39.5), actor="test", message="preempted")
    transitions.complete_release(allocation.pk, exit_code=None, at=T0 + minutes(40), actor="test")
    result = accounting.roll_up(T0 + minutes(45))
    assert result.late_jobs == 1
    t = totals()
    assert t["allocated"] == Decimal(8 * 40 * 60)
    assert t["lost"] == Decimal(14_400)
    assert t["lost_cost"].quantize(CENT) == Decimal("10.00")
    assert float(t["retained"]) == pytest.approx(10 * 10 * 60)
    assert t["productive"] == Decimal("0.75") * 8 * 10 * 60
    assert_levels_agree()


def test_price_change_mid_window() -> None:
    """$2.50 until 11:00, $3.10 from then; 8 GPUs held 10:30–11:30:
    8 × 0.5 h × $2.50 + 8 × 0.5 h × $3.10 = $10.00 + $12.40 = $22.40."""
    gpu = h100()
    f.make_price_rate(gpu, "3.1000", tier=CapacityTier.RESERVED, effective_from=T0 + minutes(60))
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0 + minutes(30))
    hold(job, [(n, 8)], T0 + minutes(30), T0 + minutes(90))
    accounting.catch_up(T0 + minutes(120))
    assert totals()["cost"].quantize(CENT) == Decimal("22.40")
    hours = dict(UsageRollup.objects.filter(bucket=accounting.HOUR).values_list("start", "cost_usd"))
    assert hours[T0].quantize(CENT) == Decimal("10.00")
    assert hours[T0 + minutes(60)].quantize(CENT) == Decimal("12.40")


def test_borrowed_job_and_idle_guarantees() -> None:
    """Two nodes × 8 H100 ($2.50 reserved); ml and vision each guaranteed 8, one cohort.
    10:00–11:00 ml runs 16 GPUs (8 of them borrowed): ml pays 16 GPU-h = $40.00, and vision's
    unused 8 are lent, so neither team has idle guarantee. 11:00–12:00 nothing runs: each team's
    8 guaranteed GPUs sit idle, 8 GPU-h = $20.00 each. __idle__ = 32 − 16 GPU-h = $40.00."""
    gpu = h100()
    a, b = node(gpu), node(gpu)
    cohort = f.make_cohort("shared")
    ml, vision = f.make_team("ml", cohort=cohort), f.make_team("vision", cohort=cohort)
    f.make_quota(ml, gpu, 8)
    f.make_quota(vision, gpu, 8)
    job = running_job(ml, gpus=16, started_at=T0, borrowed=True)
    allocation = hold(job, [(a, 8), (b, 8)], T0, T0 + minutes(60), borrowed=True)
    report(allocation, a, T0, T0 + minutes(60))
    report(allocation, b, T0, T0 + minutes(60), steps_per_s=0)  # rank 0 reports the progress
    now = T0 + minutes(120)
    accounting.catch_up(now)
    hour = {(r["team__name"], r["start"]): r for r in QuotaRollup.objects.filter(bucket=accounting.HOUR).values(
        "team__name", "start", "used_gpu_seconds", "borrowed_gpu_seconds", "lent_gpu_seconds", "idle_gpu_seconds")}
    assert hour[("ml", T0)]["borrowed_gpu_seconds"] == Decimal(8 * 3600)
    assert hour[("vision", T0)]["lent_gpu_seconds"] == Decimal(8 * 3600)
    assert hour[("vision", T0)]["idle_gpu_seconds"] == 0
    assert hour[("vision", T0 + minutes(60))]["idle_gpu_seconds"] == Decimal(8 * 3600)
    report_ = showback.showback(showback.Window(T0, now, "2h"), "team", FINANCE, now)
    by_team = {e.name: e for e in report_.entries}
    assert by_team["ml"].cost_usd.quantize(CENT) == Decimal("40.00")
    assert UsageRollup.objects.filter(bucket=accounting.DAY, borrowed=True).aggregate(s=Sum("allocated_gpu_seconds"))["s"] == Decimal(16 * 3600)
    assert by_team["ml"].idle_reserved_usd.quantize(CENT) == Decimal("20.00")
    assert by_team["vision"].idle_reserved_usd.quantize(CENT) == Decimal("20.00")
    assert by_team["vision"].cost_usd == 0
    assert report_.idle is not None and report_.idle.cost_usd.quantize(CENT) == Decimal("40.00")


def test_lending_limit_leaves_the_rest_of_the_guarantee_idle() -> None:
    """As above, but vision and speech (8 each, a third node) may each lend at most 4 GPUs:
    10:00–11:00 vision lends 4 and 4 sit idle; 11:00–12:00 all 8 sit idle: 12 GPU-h = $30.00.
    (Until 7 Dec this ran without speech: ml's 16 then ran on all of vision's guarantee on a
    full fleet, and vision's 4 beyond its limit were said idle; they are lent beyond the limit
    now, test_accounting_tiers.py.)"""
    gpu = h100()
    a, b = node(gpu), node(gpu)
    node(gpu)
    cohort = f.make_cohort("shared")
    ml, vision = f.make_team("ml", cohort=cohort), f.make_team("vision", cohort=cohort)
    f.make_quota(ml, gpu, 8)
    f.make_quota(vision, gpu, 8, lending_limit=4)
    f.make_quota(f.make_team("speech", cohort=cohort), gpu, 8, lending_limit=4)
    job = running_job(ml, gpus=16, started_at=T0, borrowed=True)
    hold(job, [(a, 8), (b, 8)], T0, T0 + minutes(60), borrowed=True)
    now = T0 + minutes(120)
    accounting.catch_up(now)
    entries = {e.name: e for e in showback.showback(showback.Window(T0, now, "2h"), "team", FINANCE, now).entries}
    assert entries["vision"].idle_reserved_gpu_seconds == Decimal(12 * 3600)
    assert entries["vision"].idle_reserved_usd.quantize(CENT) == Decimal("30.00")


def test_failed_job_loses_its_work_since_the_checkpoint_but_it_is_not_preemption_waste() -> None:
    """8 GPUs 10:00–10:40, checkpoint at 10:30, then the job fails (exit 1). Retained: 30 min of
    steps; productive = 0.75 × 8 × 30 × 60 = 10,800 GPU-s; preemption waste: none."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0, last_checkpoint_at=T0 + minutes(30))
    allocation = hold(job, [(n, 8)], T0)
    report(allocation, n, T0, T0 + minutes(40))
    assert transitions.complete_release(allocation.pk, exit_code=1, at=T0 + minutes(40), actor="test")
    assert Job.objects.get(pk=job.pk).state == JobState.FAILED
    accounting.catch_up(T0 + minutes(60))
    t = totals()
    assert t["productive"] == Decimal(10_800)
    assert t["lost"] == 0
    assert float(t["retained"]) == pytest.approx(10 * 30 * 60)


def test_a_stalled_stretch_is_active_but_not_productive() -> None:
    """20 minutes at 10 steps/s, then 20 minutes at 5 steps/s with the same activity 0.8 (the
    kernels are busy, the job is not: a collective stall). Rate = 600 / 384 steps per active
    GPU-s; productive = 384 × 20 + 192 × 20 = 11,520 GPU-s of 15,360 active."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0)
    allocation = hold(job, [(n, 8)], T0, T0 + minutes(40))
    report(allocation, n, T0, T0 + minutes(20), activity=0.8, steps_per_s=10)
    report(allocation, n, T0 + minutes(20), T0 + minutes(40), activity=0.8, steps_per_s=5)
    accounting.catch_up(T0 + minutes(60))
    t = totals()
    assert t["active"] == Decimal(15_360)
    assert t["productive"] == Decimal(11_520)


def test_late_sample_is_included_when_it_arrives() -> None:
    """Minute 10:05 had no sample when it was rolled; the sample arrives later and the next run
    re-derives that minute: active gains 0.75 × 8 × 60 = 360 GPU-s."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0)
    allocation = hold(job, [(n, 8)], T0)
    report(allocation, n, T0, T0 + minutes(5))
    report(allocation, n, T0 + minutes(6), T0 + minutes(30))
    accounting.catch_up(T0 + minutes(30))
    before = totals(accounting.HOUR)["active"]
    report(allocation, n, T0 + minutes(5), T0 + minutes(6))
    assert accounting.roll_up(T0 + minutes(31)).late_jobs == 1
    after = totals(accounting.HOUR, start=T0)["active"]
    assert after - before == Decimal(360)  # 10:30 has no sample yet: only the late minute adds
    assert_levels_agree()


def test_gang_member_that_exits_first_frees_its_gpus_first() -> None:
    """A gang on two nodes × 8 from 10:00; the member on node b exits at 10:20 (its GPUs are free
    from then), the allocation settles at 10:30: 8 × 30 + 8 × 20 min = 24,000 GPU-s."""
    gpu = h100()
    a, b = node(gpu), node(gpu)
    job = running_job(f.make_team("ml"), gpus=16, started_at=T0)
    allocation = hold(job, [(a, 8), (b, 8)], T0)
    transitions.record_event(EventKind.ALLOCATION_RELEASED, "agent:b", job=job, allocation=allocation, node=b,
                             at=T0 + minutes(20), reason="MemberExited", message="member gone")
    Allocation.objects.filter(pk=allocation.pk).update(state=AllocationState.RELEASED, released_at=T0 + minutes(30))
    accounting.catch_up(T0 + minutes(40))
    assert totals()["allocated"] == Decimal(24_000)


def test_serving_job_counts_useful_tokens_as_its_progress() -> None:
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("serving"), gpus=8, started_at=T0)
    allocation = hold(job, [(n, 8)], T0, T0 + minutes(30))
    report(allocation, n, T0, T0 + minutes(30), steps_per_s=0, tokens_per_s=2_000)
    accounting.catch_up(T0 + minutes(40))
    assert JobProgressRate.objects.get(job=job).unit == "useful_tokens"
    t = totals()
    assert t["productive"] == t["active"] > 0
    entry = showback.showback(showback.Window(T0, T0 + minutes(40), "40m"), "job", FINANCE, T0 + minutes(40)).entries[0]
    assert entry.useful_tokens == pytest.approx(2_000 * 30 * 60)
    # $/useful token = $10.00 (8 GPUs × 0.5 h × $2.50) / 3.6 M tokens
    assert entry.usd_per_useful_token.quantize(Decimal("1e-12")) == (Decimal("10") / Decimal(3_600_000)).quantize(Decimal("1e-12"))


def test_short_job_without_a_steady_window_uses_its_average_rate() -> None:
    """Four minutes are too few for a steady window: the job's rate is its average, so with no
    loss every active second is productive."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0)
    allocation = hold(job, [(n, 8)], T0, T0 + minutes(4))
    report(allocation, n, T0, T0 + minutes(4))
    accounting.catch_up(T0 + minutes(10))
    assert not JobProgressRate.objects.get(job=job).steady
    t = totals()
    assert t["productive"] == t["active"] == Decimal(4 * 360)


def test_rolling_the_same_instant_twice_changes_nothing() -> None:
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0)
    report(hold(job, [(n, 8)], T0), n, T0, T0 + minutes(30) + timedelta(seconds=20), every=minutes(0.25))
    now = T0 + minutes(30) + timedelta(seconds=20)
    accounting.catch_up(now)
    first = sorted(UsageRollup.objects.values_list("bucket", "start", "allocated_gpu_seconds", "active_gpu_seconds",
                                                    "productive_gpu_seconds", "cost_usd"))
    accounting.roll_up(now)
    again = sorted(UsageRollup.objects.values_list("bucket", "start", "allocated_gpu_seconds", "active_gpu_seconds",
                                                    "productive_gpu_seconds", "cost_usd"))
    assert first == again
    # the trailing partial minute holds exactly the 20 s rolled so far
    last = UsageRollup.objects.get(bucket=accounting.MINUTE, start=T0 + minutes(30))
    assert last.allocated_gpu_seconds == Decimal(8 * 20)


def test_retention_drops_raw_samples_only_after_their_rollups_exist() -> None:
    """Samples from 10:00–12:00 on 2 November. Rolled up to 12:00; ten days later retention drops
    the samples and minute rows (older than 7 days), keeps hour and day rows, and showback over
    the old window still reads $40.00. Samples newer than what was rolled stay."""
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0)
    allocation = hold(job, [(n, 8)], T0, T0 + minutes(120))
    report(allocation, n, T0, T0 + minutes(120))
    accounting.catch_up(T0 + minutes(120))
    window = showback.Window(T0, T0 + minutes(120), "2h")
    cost = showback.showback(window, "team", FINANCE, T0 + minutes(120)).total.cost_usd
    later = T0 + timedelta(days=10)
    result = accounting.apply_retention(later)
    assert result.samples_deleted == 120
    assert not UsageSample.objects.exists()
    assert not UsageRollup.objects.filter(bucket=accounting.MINUTE).exists()
    assert UsageRollup.objects.filter(bucket=accounting.HOUR).count() == 2
    assert showback.showback(window, "team", FINANCE, later).total.cost_usd == cost
    assert cost.quantize(CENT) == Decimal("40.00")


def test_retention_keeps_samples_the_rollups_have_not_reached() -> None:
    gpu = h100()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0)
    allocation = hold(job, [(n, 8)], T0)
    report(allocation, n, T0, T0 + minutes(120))
    accounting.roll_up(T0 + minutes(30))  # the cursor now stands at 10:30 (no catch-up)
    # ten days later, before any further rollup: nothing newer than the rolled point may go
    assert accounting.apply_retention(T0 + timedelta(days=10)).samples_deleted == 0
    assert UsageSample.objects.count() == 120


@pytest.mark.django_db(transaction=True)
def test_a_run_while_another_holds_the_cursor_does_nothing() -> None:
    """Two beat ticks at once: the second finds the cursor row locked and returns at once."""
    import threading

    from django.db import connection, connections, transaction

    from controlplane.models import AccountingCursor

    AccountingCursor.objects.get_or_create(name=accounting.CURSOR_NAME)
    results: list[accounting.RollupResult] = []

    def second_run() -> None:
        try:
            results.append(accounting.roll_up(T0))
        finally:
            connections.close_all()

    with transaction.atomic():
        AccountingCursor.objects.select_for_update().get(name=accounting.CURSOR_NAME)
        thread = threading.Thread(target=second_run)
        thread.start()
        thread.join(timeout=20)
    assert connection.vendor == "postgresql"
    assert results and not results[0].ran


@pytest.mark.parametrize("price_rows", [0, 1])
def test_usage_without_any_price_costs_nothing_and_says_so(price_rows: int, caplog) -> None:  # type: ignore[no-untyped-def]
    gpu = h100()
    if not price_rows:
        PriceRate.objects.all().delete()
    n = node(gpu)
    job = running_job(f.make_team("ml"), gpus=8, started_at=T0)
    hold(job, [(n, 8)], T0, T0 + minutes(60))
    accounting.catch_up(T0 + minutes(60))
    cost = totals()["cost"]
    assert cost.quantize(CENT) == (Decimal("20.00") if price_rows else Decimal("0.00"))


def test_rollup_lag_is_reported_as_the_window_actually_covered() -> None:
    gpu = h100()
    node(gpu)
    accounting.catch_up(T0 + minutes(30))
    late = T0 + minutes(90)
    result = showback.showback(showback.Window(T0, late, "90m"), "team", FINANCE, late)
    assert result.end == T0 + minutes(30)


def test_members_read_their_own_team_only() -> None:
    gpu = h100()
    n = node(gpu, gpus=16)
    ml, vision = f.make_team("ml"), f.make_team("vision")
    for team in (ml, vision):
        job = running_job(team, gpus=8, started_at=T0)
        hold(job, [(n, 8)], T0, T0 + minutes(60)) if team is ml else hold(job, [(n, 8)], T0, T0 + minutes(30))
    now = T0 + minutes(60)
    accounting.catch_up(now)
    member = Access(is_admin=False, is_finance=False, team_ids=frozenset({ml.pk}))
    result = showback.showback(showback.Window(T0, now, "1h"), "team", member, now)
    assert [e.name for e in result.entries] == ["ml"]
    assert result.idle is None
    assert result.total.cost_usd.quantize(CENT) == Decimal("20.00")


def test_month_window_is_the_calendar_month_in_utc() -> None:
    now = datetime(2026, 12, 5, tzinfo=UTC)
    window = showback.month_window("2026-11", now)
    assert (window.start, window.end) == (datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC))
    with pytest.raises(showback.AccountingQueryError) as error:
        showback.month_window("2026-13", now)
    assert error.value.field == "month"
