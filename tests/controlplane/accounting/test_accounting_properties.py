"""Property tests of the whole rollup on PostgreSQL: random fleets histories (allocations,
gaps and overlaps in the agents' reports, evictions with checkpoints, a price change, late
samples), rolled in two steps, must keep every invariant of the issue:

  - allocated ≥ active ≥ productive ≥ 0 (and lost ≤ allocated) for every job, team and bucket;
  - hours are sums of minutes and days of hours;
  - allocated GPU-seconds and cost per job equal the hand formula (GPUs × seconds × the rate in
    force), to the cent;
  - the groups sum to the fleet total, and fleet allocated + idle = capacity × time;
  - the CSV's TOTAL row is the sum of its rows to the cent.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.db.models import F, Q, Sum
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controlplane.choices import CapacityTier, EventKind
from controlplane.models import Allocation, FleetRollup, GroupRollup, QuotaRollup, UsageRollup
from controlplane.services import accounting, showback, transitions
from controlplane.services.access import Access
from controlplane.services.usage_tiers import PriceBook, to_us
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, report, running_job

FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())
HORIZON_MIN = 180


@st.composite
def histories(draw: st.DrawFn) -> dict:
    jobs = []
    for k in range(draw(st.integers(1, 4))):
        allocations, t = [], draw(st.integers(0, 40))
        for _ in range(draw(st.integers(1, 2))):
            start = t
            length = draw(st.integers(1, 90))
            end = min(start + length, HORIZON_MIN) if draw(st.integers(0, 4)) else None
            evicted = end is not None and draw(st.booleans())
            checkpoint = draw(st.integers(start, end)) if evicted else None
            period = draw(st.integers(20, 300))
            activity, rate = draw(st.floats(0, 1)), draw(st.integers(0, 20))
            missing = draw(st.sets(st.integers(0, 40), max_size=4))
            late = draw(st.sets(st.integers(0, 40), max_size=4))
            reports = []
            r, stop, i = start * 60, (end if end is not None else HORIZON_MIN) * 60, 0
            while r < stop:
                e = min(stop, r + period)
                if i not in missing:
                    # activity and pace wobble from report to report, as real ones do
                    wobble = 1.0 - 0.1 * (i % 3)
                    reports.append((r, e, activity * wobble, rate * (e - r) * wobble, i in late))
                r, i = e, i + 1
            allocations.append({"start": start, "end": end, "evicted": evicted, "checkpoint": checkpoint,
                                "reports": reports})
            if end is None:
                break
            t = end + draw(st.integers(0, 20))
            if t >= HORIZON_MIN - 1:
                break
        jobs.append({"team": k % 2, "allocations": allocations})
    return {
        "jobs": jobs,
        "price_change": draw(st.one_of(st.none(), st.integers(1, HORIZON_MIN * 60 - 1))),
        "nominal": (draw(st.integers(0, 8)), draw(st.integers(0, 8))),
        "first_roll": draw(st.integers(1, HORIZON_MIN - 1)),
    }


def build(history: dict) -> dict:
    gpu = h100("2.5000", CapacityTier.RESERVED)
    f.make_price_rate(gpu, "1.1000", tier=CapacityTier.SPOT, effective_from=T0 - timedelta(days=30))
    if history["price_change"] is not None:
        f.make_price_rate(gpu, "3.1000", tier=CapacityTier.RESERVED,
                          effective_from=T0 + timedelta(seconds=history["price_change"]))
    nodes = [node(gpu, CapacityTier.RESERVED), node(gpu, CapacityTier.SPOT)]
    cohort = f.make_cohort()
    teams = [f.make_team(cohort=cohort), f.make_team(cohort=cohort)]
    for team, nominal in zip(teams, history["nominal"], strict=True):
        f.make_quota(team, gpu, nominal)
    late, expected = [], {}
    for k, spec in enumerate(history["jobs"]):
        on, gpus = nodes[k % 2], 4  # job k holds its own four GPUs of node k % 2: no GPU twice
        job = running_job(teams[spec["team"]], gpus=gpus, started_at=T0 + minutes(spec["allocations"][0]["start"]))
        held, lost = 0, 0.0
        for a in spec["allocations"]:
            start = T0 + minutes(a["start"])
            end = T0 + minutes(a["end"]) if a["end"] is not None else None
            allocation = hold(job, [(on, gpus)], start, end, first_index=4 * (k // 2))
            held += gpus * ((end or T0 + minutes(HORIZON_MIN)) - start).total_seconds()
            if a["evicted"]:
                lost_s = gpus * (a["end"] - a["checkpoint"]) * 60.0
                lost += lost_s
                transitions.record_event(EventKind.JOB_PREEMPTED, "test", job=job, allocation=allocation, at=end,
                                         reason="Preempted", data={"lost_gpu_seconds": lost_s})
            for r0, r1, activity, steps, is_late in a["reports"]:
                row = (allocation, on, T0 + timedelta(seconds=r0), T0 + timedelta(seconds=r1), activity, steps)
                (late if is_late else expected.setdefault("now", [])).append(row)
        expected[job.pk] = {"held": Decimal(int(held)), "lost": lost, "node": on, "gpus": gpus}
    for allocation, on, s0, s1, activity, steps in expected.pop("now", []):
        report(allocation, on, s0, s1, every=s1 - s0, activity=activity, steps_per_s=steps / (s1 - s0).total_seconds())
    return {"late": late, "expected": expected, "nodes": nodes}


def exact_cost(job_id: int) -> Decimal:
    """GPUs × µs × the rate in force, summed over the job's allocations: the hand formula."""
    from controlplane.models import PriceRate

    book = PriceBook.from_rows(PriceRate.objects.values_list("gpu_type_id", "capacity_tier", "effective_from",
                                                             "usd_per_gpu_hour"))
    total = Decimal(0)
    for allocation in Allocation.objects.filter(job_id=job_id).prefetch_related("gpus__node"):
        gpus = list(allocation.gpus.all())
        end = allocation.released_at or T0 + minutes(HORIZON_MIN)
        total += book.cost(gpus[0].node.gpu_type_id, gpus[0].node.capacity_tier, to_us(allocation.created_at),
                           to_us(end), len(gpus))
    return total


@pytest.mark.slow
@pytest.mark.django_db
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                   HealthCheck.too_slow])
@given(histories())
def test_rollups_keep_every_invariant(history: dict) -> None:
    with transaction.atomic():
        built = build(history)
        now = T0 + minutes(HORIZON_MIN)
        accounting.catch_up(T0 + minutes(history["first_roll"]))
        for allocation, on, s0, s1, activity, steps in built["late"]:
            report(allocation, on, s0, s1, every=s1 - s0, activity=activity,
                   steps_per_s=steps / (s1 - s0).total_seconds())
        accounting.catch_up(now)
        check(built, now)
        transaction.set_rollback(True)


def check(built: dict, now) -> None:  # type: ignore[no-untyped-def]
    # 1. tiers ordered everywhere (the database refuses otherwise; say it in the test too)
    for model in (UsageRollup, FleetRollup):
        assert not model.objects.filter(
            Q(active_gpu_seconds__gt=F("allocated_gpu_seconds")) | Q(productive_gpu_seconds__gt=F("active_gpu_seconds"))
            | Q(productive_gpu_seconds__lt=0) | Q(lost_gpu_seconds__gt=F("allocated_gpu_seconds"))
        ).exists()
    # ... per team and bucket too (sums of ordered rows stay ordered, checked explicitly)
    for row in UsageRollup.objects.values("bucket", "start", "team_id").annotate(
        a=Sum("allocated_gpu_seconds"), b=Sum("active_gpu_seconds"), c=Sum("productive_gpu_seconds")
    ):
        assert row["a"] >= row["b"] >= row["c"] >= 0
    # 2. levels agree
    fields = ["allocated_gpu_seconds", "active_gpu_seconds", "productive_gpu_seconds", "lost_gpu_seconds", "cost_usd",
              "lost_cost_usd"]
    for model, extra in ((UsageRollup, []), (FleetRollup, ["capacity_gpu_seconds", "capacity_cost_usd"])):
        levels = [model.objects.filter(bucket=b).aggregate(**{x: Sum(x) for x in fields + extra})
                  for b in (accounting.MINUTE, accounting.HOUR, accounting.DAY)]
        if model is UsageRollup:
            job_levels = levels
        assert levels[0] == levels[1] == levels[2]
    groups = [GroupRollup.objects.filter(bucket=b).aggregate(**{x: Sum(x) for x in fields})
              for b in (accounting.DAY, accounting.MONTH)]
    assert groups[0] == groups[1] == {k: job_levels[2][k] for k in groups[0]}
    quota_levels = [QuotaRollup.objects.filter(bucket=b).aggregate(i=Sum("idle_gpu_seconds"), c=Sum("idle_cost_usd"))
                    for b in (accounting.MINUTE, accounting.HOUR, accounting.DAY)]
    assert quota_levels[0] == quota_levels[1] == quota_levels[2]
    # 3. each job: allocated and cost by the hand formula, lost as the control loop recorded it
    for job_id, want in built["expected"].items():
        got = UsageRollup.objects.filter(bucket=accounting.DAY, job_id=job_id).aggregate(
            a=Sum("allocated_gpu_seconds"), c=Sum("cost_usd"), lost=Sum("lost_gpu_seconds"))
        assert got["a"] == want["held"]
        assert (got["c"] or Decimal(0)).quantize(Decimal("0.01")) == exact_cost(job_id).quantize(Decimal("0.01"))
        assert abs(float(got["lost"] or 0) - want["lost"]) < 0.01
    # 4. the fleet: groups sum to the total; allocated + idle = capacity × time
    first = UsageRollup.objects.aggregate(s=Sum("allocated_gpu_seconds"))  # non-empty by construction
    assert first["s"] is not None
    start = min(a.created_at for a in Allocation.objects.all())
    report = showback.showback(showback.Window(start, now, "all"), "team", FINANCE, now)
    assert report.idle is not None and report.idle.idle_gpu_seconds >= 0
    assert report.capacity_gpu_seconds == Decimal(16 * int((now - start).total_seconds()))
    assert report.total.allocated_gpu_seconds + report.idle.idle_gpu_seconds == report.capacity_gpu_seconds
    assert sum((e.cost_usd for e in report.entries), Decimal(0)) + report.idle.cost_usd == report.capacity_cost_usd
    # 5. the CSV adds up to the cent
    rows = list(csv.reader(io.StringIO(showback.showback_csv(report))))
    body, total = rows[1:-1], rows[-1]
    for column in (4, 7, 8):
        assert sum(Decimal(r[column] or "0") for r in body) == Decimal(total[column])
    assert Decimal(total[4]) == report.capacity_cost_usd.quantize(Decimal("0.01"))
