"""A price correction that reaches back past the minute rows kept: finance corrects last
month's rate, and the hours (and days) whose minutes retention has already dropped follow it,
wherever one rate prices the whole bucket (docs/accounting.md, "Cost").

Fleet: one H100 node of 8 GPUs (reserved, $2.50/GPU-h from 2026-01-01); team ml holds a
guarantee of 8 H100. Job A holds 4 GPUs 10:00–13:00 on 2 November, job B 4 GPUs 10:00–12:00 on
3 November. The rollups run from 2 November 10:00 to 4 November 00:30 with one day of raw
retention, then retention runs: 2 November has hour and day rows but no minutes (with one day
of hour retention too: day rows only); 3 November keeps its minutes.

  2 Nov  ml 4 × 3 h = 12 GPU-h ($30.00);  capacity 8 × 14 h = 112 GPU-h ($280.00);
         idle guarantee 112 − 12 = 100 GPU-h ($250.00)
  3 Nov  ml 4 × 2 h =  8 GPU-h ($20.00);  capacity 8 × 24 h = 192 GPU-h ($480.00);
         idle guarantee 192 − 8 = 184 GPU-h ($460.00)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext, override_settings

from controlplane.celery import app
from controlplane.choices import CapacityTier
from controlplane.models import FleetRollup, GpuType, GroupRollup, PriceRate, QuotaRollup, UsageRollup
from controlplane.services import accounting, showback
from controlplane.services.access import Access
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100, hold, minutes, node, report, running_job
from tests.controlplane.built_once import Shared, built_once

pytestmark = pytest.mark.django_db
FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())
CENT = Decimal("0.01")
NOV2 = datetime(2026, 11, 2, tzinfo=UTC)
NOV3 = NOV2 + timedelta(days=1)
LATER = NOV3 + timedelta(days=1, minutes=30)
MINUTE, HOUR, DAY, MONTH = accounting.MINUTE, accounting.HOUR, accounting.DAY, accounting.MONTH


@pytest.fixture
def committed(monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any) -> Any:
    """`with committed(): rate.save()`: the save commits and its queued `qm.accounting.reprice`
    runs at once, as in the demo (no broker; a worker does it otherwise)."""
    monkeypatch.setitem(app.conf, "task_always_eager", True)
    return lambda: django_capture_on_commit_callbacks(execute=True)


def retention(qm: dict[str, Any], hour_retention_days: float) -> dict[str, Any]:
    return {**qm, "RAW_SAMPLE_RETENTION_DAYS": 1, "HOUR_ROLLUP_RETENTION_DAYS": hour_retention_days}


def build(settings: Any, *, hour_retention_days: float = 400, extra_rates: tuple[tuple[str, datetime], ...] = (),
          on_demand: str | None = None) -> Any:
    """The fleet above, rolled up and past retention. `extra_rates`: reserved rates known
    while the rollups ran (their minutes were split at their starts); `on_demand`: an on-demand
    H100 rate since January (no node is on demand). Without them: the `rolled_fleet` fixture's."""
    settings.QM = retention(settings.QM, hour_retention_days)
    return _build(hour_retention_days, extra_rates, on_demand)


def _build(hour_retention_days: float, extra_rates: tuple[tuple[str, datetime], ...], on_demand: str | None) -> Any:
    gpu = h100("2.5000")
    for usd, since in extra_rates:
        f.make_price_rate(gpu, usd, tier=CapacityTier.RESERVED, effective_from=since)
    if on_demand is not None:
        f.make_price_rate(gpu, on_demand, tier=CapacityTier.ON_DEMAND, effective_from=datetime(2026, 1, 1, tzinfo=UTC))
    n = node(gpu)
    team = f.make_team("ml")
    f.make_quota(team, gpu, nominal_gpus=8)
    a = running_job(team, gpus=4, started_at=T0)
    report(hold(a, [(n, 4)], T0, T0 + minutes(180)), n, T0, T0 + minutes(180))
    accounting.catch_up(NOV3)
    b_start = NOV3 + timedelta(hours=10)
    b = running_job(team, gpus=4, started_at=b_start)
    report(hold(b, [(n, 4)], b_start, b_start + minutes(120)), n, b_start, b_start + minutes(120))
    accounting.catch_up(LATER)
    accounting.apply_retention(LATER)
    for model in (UsageRollup, FleetRollup, QuotaRollup):
        assert not model.objects.filter(bucket=MINUTE, start__lt=NOV3).exists()
        assert model.objects.filter(bucket=MINUTE, start__gte=NOV3).exists()
        assert model.objects.filter(bucket=HOUR, start__lt=NOV3).exists() == (hour_retention_days > 1)
        assert model.objects.filter(bucket=DAY, start=NOV2).exists()
    return gpu


def figures(start: datetime, end: datetime) -> dict[str, Decimal]:
    report = showback.showback(showback.Window(start, end, "w"), "team", FINANCE, LATER)
    assert (report.start, report.end) == (start, end)
    ml = next(e for e in report.entries if e.name == "ml")
    return {"ml": ml.cost_usd.quantize(CENT), "idle": report.idle.cost_usd.quantize(CENT),
            "reserved": (ml.idle_reserved_usd or Decimal(0)).quantize(CENT),
            "fleet": (report.capacity_cost_usd or Decimal(0)).quantize(CENT)}


def day(d: datetime) -> dict[str, Decimal]:
    return figures(d, d + timedelta(days=1))


def money(ml: str, fleet: str, reserved: str) -> dict[str, Decimal]:
    return {"ml": Decimal(ml), "idle": Decimal(fleet) - Decimal(ml), "reserved": Decimal(reserved),
            "fleet": Decimal(fleet)}


def rate(gpu: Any, since: datetime = datetime(2026, 1, 1, tzinfo=UTC)) -> PriceRate:
    return PriceRate.objects.get(gpu_type=gpu, capacity_tier=CapacityTier.RESERVED, effective_from=since)


def snapshot(start: datetime, end: datetime) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    for model, fields in ((UsageRollup, ("job_id", "cost_usd", "lost_cost_usd")),
                          (FleetRollup, ("cost_usd", "capacity_cost_usd")), (QuotaRollup, ("team_id", "idle_cost_usd"))):
        rows += sorted((model.__name__, *r) for r in model.objects.filter(start__gte=start, start__lt=end)
                       .values_list("bucket", "start", "gpu_type_id", *fields))
    return rows


def assert_levels_agree() -> None:
    """Every coarser row is the sum of the finer rows kept under it, to the last decimal."""
    for model, fields, keys in (
        (UsageRollup, ["cost_usd", "lost_cost_usd", "allocated_gpu_seconds"], ["job_id", "gpu_type_id"]),
        (FleetRollup, ["cost_usd", "capacity_cost_usd"], ["gpu_type_id", "capacity_tier"]),
        (QuotaRollup, ["idle_cost_usd", "idle_gpu_seconds"], ["team_id", "gpu_type_id"]),
    ):
        for finer, coarser in ((MINUTE, HOUR), (HOUR, DAY)):
            for row in model.objects.filter(bucket=coarser).values("start", *keys, *fields):
                length = timedelta(seconds=coarser)
                under = model.objects.filter(bucket=finer, start__gte=row["start"], start__lt=row["start"] + length,
                                             **{k: row[k] for k in keys})
                if not under.exists():
                    continue  # retention dropped them
                sums = under.aggregate(**{x: Sum(x) for x in fields})
                assert sums == {x: row[x] for x in fields}, (model.__name__, coarser, row["start"])
    # the fleet's usage columns are the jobs' sums at every level kept
    for bucket in (HOUR, DAY):
        fleet = FleetRollup.objects.filter(bucket=bucket).aggregate(c=Sum("cost_usd"), lost=Sum("lost_cost_usd"))
        jobs = UsageRollup.objects.filter(bucket=bucket).aggregate(c=Sum("cost_usd"), lost=Sum("lost_cost_usd"))
        assert fleet == jobs, bucket
    usage_days = UsageRollup.objects.filter(bucket=DAY).aggregate(c=Sum("cost_usd"))["c"]
    assert GroupRollup.objects.filter(bucket=DAY).aggregate(c=Sum("cost_usd"))["c"] == usage_days
    assert GroupRollup.objects.filter(bucket=MONTH).aggregate(c=Sum("cost_usd"))["c"] == usage_days


def at(gpu_seconds: Decimal, usd_per_gpu_hour: str) -> Decimal:
    return (gpu_seconds * Decimal(usd_per_gpu_hour) / 3600).quantize(Decimal("1e-15"))


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    """The warnings of buckets that kept their old price."""
    return [r.msg for r in caplog.records
            if isinstance(r.msg, dict) and r.levelno >= logging.WARNING and "rate_changes_at" in r.msg]


def test_halving_the_rate_halves_days_whose_hours_are_gone_too(settings: Any, committed: Any) -> None:
    gpu = build(settings, hour_retention_days=1)
    correction = rate(gpu)
    correction.usd_per_gpu_hour = Decimal("1.2500")
    with committed():
        correction.save()
    assert day(NOV2) == money("15.00", "140.00", "125.00")
    assert day(NOV3) == money("10.00", "240.00", "230.00")
    nov2 = UsageRollup.objects.get(bucket=DAY, start=NOV2)
    assert nov2.cost_usd == at(Decimal(4 * 3 * 3600), "1.25")
    group = GroupRollup.objects.get(bucket=DAY, start=NOV2)
    assert group.cost_usd == nov2.cost_usd
    assert GroupRollup.objects.get(bucket=MONTH).cost_usd == UsageRollup.objects.filter(bucket=DAY).aggregate(
        c=Sum("cost_usd"))["c"]
    assert_levels_agree()


def test_a_rate_starting_inside_a_day_whose_hours_are_gone_keeps_that_days_price(
    settings: Any, committed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    gpu = build(settings, hour_retention_days=1)
    before = snapshot(NOV2, NOV3)
    with committed():
        f.make_price_rate(gpu, "3.1000", tier=CapacityTier.RESERVED, effective_from=NOV2 + timedelta(hours=11, minutes=30))
    assert snapshot(NOV2, NOV3) == before
    assert day(NOV2) == money("30.00", "280.00", "250.00")
    assert day(NOV3) == money("24.80", "595.20", "570.40")
    assert_levels_agree()
    kept = warnings_of(caplog)
    assert [(w["bucket"], w["start"], w["capacity_tier"]) for w in kept] == [("day", "2026-11-02T00:00:00Z", "reserved")]


def test_a_rate_removed_after_its_minutes_are_gone_leaves_whole_hours_to_the_rate_before(
    settings: Any, committed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """$3.10 from 11:30 was in the table when the minutes were rolled (the 11:00 hour was split
    minute by minute). Removed later, every hour lies within the $2.50 rate again: all of them,
    the 11:00 hour included, are repriced exactly."""
    split = NOV2 + timedelta(hours=11, minutes=30)
    gpu = build(settings, extra_rates=(("3.1000", split),))
    assert day(NOV2)["ml"] == Decimal("33.60")  # 10 + 4 × (0.5 × 2.50 + 0.5 × 3.10) + 4 × 3.10
    with committed():
        rate(gpu, split).delete()
    assert day(NOV2) == money("30.00", "280.00", "250.00")
    assert day(NOV3) == money("20.00", "480.00", "460.00")
    assert_levels_agree()
    assert warnings_of(caplog) == []


def test_a_bucket_the_change_does_not_reach_keeps_its_split_without_a_warning(
    settings: Any, committed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Rates known when 2 November was rolled: $2.50 (January), $3.00 from 15:00, $3.10 from
    20:30 (the 20:00 hour was split minute by minute). Halving January's rate changes prices up
    to 15:00 only: the 20:00 hour's split still holds, so nothing is logged about it.
      ml 4 × 3 h × 1.25 = $15.00; capacity 8 × (5 × 1.25 + 5.5 × 3.00 + 3.5 × 3.10) = $268.80;
      idle guarantee (12 + 16) GPU-h × 1.25 + 8 × (5.5 × 3.00 + 3.5 × 3.10) = $253.80
    Moving the 15:00 rate to 15:30 then cuts the 15:00 hour, which is logged (and only it)."""
    gpu = build(settings, extra_rates=(("3.0000", NOV2 + timedelta(hours=15)),
                                       ("3.1000", NOV2 + timedelta(hours=20, minutes=30))))
    split_hour = snapshot(NOV2 + timedelta(hours=20), NOV2 + timedelta(hours=21))
    correction = rate(gpu)
    correction.usd_per_gpu_hour = Decimal("1.2500")
    with committed():
        correction.save()
    assert day(NOV2) == money("15.00", "268.80", "253.80")
    assert snapshot(NOV2 + timedelta(hours=20), NOV2 + timedelta(hours=21)) == split_hour
    assert warnings_of(caplog) == []
    moved = rate(gpu, NOV2 + timedelta(hours=15))
    moved.effective_from = NOV2 + timedelta(hours=15, minutes=30)
    with committed():
        moved.save()
    assert [(w["bucket"], w["start"]) for w in warnings_of(caplog)] == [("hour", "2026-11-02T15:00:00Z")]
    assert_levels_agree()


def test_idle_guarantees_follow_the_reserved_rate_rule_in_old_hours(settings: Any, committed: Any) -> None:
    """The reserved rate removed: the reserved node's hours cost nothing (no rate of its tier),
    and an idle guarantee, reserved capacity, is priced at the on-demand rate ($4.00) instead."""
    gpu = build(settings, on_demand="4.0000")
    assert day(NOV2) == money("30.00", "280.00", "250.00")
    with committed():
        rate(gpu).delete()
    assert day(NOV2) == money("0.00", "0.00", "400.00")  # 100 idle GPU-h × $4.00
    assert day(NOV3) == money("0.00", "0.00", "736.00")  # 184 idle GPU-h × $4.00
    assert_levels_agree()


# The tests below on `rolled_fleet` (the build without extra rates, hour retention of 400 days) share one
# build of it (tests/controlplane/built_once.py), so the tests building their own come first.
SHARED = Shared()


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.kept: list[Any] = []

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.msg, dict) and "rate_changes_at" in record.msg:
            self.kept.append(record.msg)


@pytest.fixture(scope="module")
def _fleet_once(django_db_setup: Any, django_db_blocker: Any) -> Iterator[int]:
    """`build(settings)`'s fleet, rolled up once for the module's tests on it (two catch-ups over
    38 hours of minutes took ~2.5 s a test, 6 under load). Its rollups keep their prices without
    a warning, as each test's `caplog` saw when it built its own."""

    def make() -> int:
        warnings = _Warnings()
        logging.getLogger().addHandler(warnings)
        try:
            with override_settings(QM=retention(django_settings.QM, 400)):
                gpu = _build(400, (), None)
        finally:
            logging.getLogger().removeHandler(warnings)
        assert warnings.kept == []
        return int(gpu.pk)

    yield from built_once(django_db_blocker, make, SHARED)


@pytest.fixture(autouse=True)
def _shared_rows_only_on_their_tests(request: pytest.FixtureRequest) -> None:
    SHARED.only_for(request, "rolled_fleet")


@pytest.fixture
def rolled_fleet(_fleet_once: int, settings: Any) -> GpuType:
    """`build(settings)`: the fleet above, rolled up and past retention (built once); its H100."""
    settings.QM = retention(settings.QM, 400)
    return GpuType.objects.get(pk=_fleet_once)


def test_the_figures_before_any_correction(rolled_fleet: GpuType) -> None:
    assert day(NOV2) == money("30.00", "280.00", "250.00")
    assert day(NOV3) == money("20.00", "480.00", "460.00")
    assert_levels_agree()


@pytest.mark.parametrize("run", [None, timedelta(hours=1)], ids=["runs-of-a-week", "runs-of-one-bucket"])
def test_halving_last_months_rate_halves_the_hours_whose_minutes_are_gone(
    rolled_fleet: GpuType, committed: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
    run: timedelta | None,
) -> None:
    """Before: 2 November kept $2.50 ($30.00, $280.00 …) and only 3 November was halved.
    `run`: the longest range re-summed at once (a year back is re-summed a week at a time);
    one bucket at a time gives the same rows."""
    gpu = rolled_fleet
    if run is not None:
        monkeypatch.setattr(accounting, "MAX_RESUM_RUN", run)
    hour_rows = {r.pk: r for r in UsageRollup.objects.filter(bucket=HOUR, start__lt=NOV3)}
    old_rows = sum(m.objects.filter(bucket=HOUR, start__lt=NOV3).count() for m in (UsageRollup, FleetRollup, QuotaRollup))
    correction = rate(gpu)
    correction.usd_per_gpu_hour = Decimal("1.2500")
    with CaptureQueriesContext(connection) as queries, committed():
        correction.save()
    # bulk: one UPDATE per table and stretch of hours under one rate, never one per row
    updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE") and "rollup" in q["sql"]]
    assert old_rows == 31 and len(updates) <= 10, updates
    assert day(NOV2) == money("15.00", "140.00", "125.00")
    assert figures(NOV2 + timedelta(hours=9), NOV2 + timedelta(hours=14)) == money("15.00", "40.00", "25.00")
    assert day(NOV3) == money("10.00", "240.00", "230.00")
    # each hour row: its GPU-seconds at the new rate; exactly half of what it was
    for row in UsageRollup.objects.filter(bucket=HOUR, start__lt=NOV3):
        assert row.cost_usd == at(row.allocated_gpu_seconds, "1.25")
        assert (row.cost_usd * 2).quantize(CENT) == hour_rows[row.pk].cost_usd.quantize(CENT)
    for row in FleetRollup.objects.filter(bucket__in=[HOUR, DAY], start__lt=NOV3):
        assert row.capacity_cost_usd == at(row.capacity_gpu_seconds, "1.25")
    for row in QuotaRollup.objects.filter(bucket__in=[HOUR, DAY], start__lt=NOV3):
        assert row.idle_cost_usd == at(row.idle_gpu_seconds, "1.25")
    month = showback.showback(showback.month_window("2026-11", LATER), "team", FINANCE, LATER)
    assert month.total.cost_usd.quantize(CENT) == Decimal("385.00")  # (280 + 480 + the half hour to 00:30, 10) / 2
    assert_levels_agree()
    assert warnings_of(caplog) == []


def test_a_rate_starting_inside_an_hour_whose_minutes_are_gone_keeps_that_hours_price(
    rolled_fleet: GpuType, committed: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """$3.10 from 2 November 11:30. The 11:00 hour cannot be split without its minutes: it keeps
    $2.50, and the log says so; 12:00 onwards is at $3.10.
      ml 2 Nov: 4 × 2.50 (10h) + 4 × 2.50 (11h, kept) + 4 × 3.10 (12h) = $32.40
      capacity: 8 × 2.50 × 2 + 8 × 3.10 × 12 = $337.60
      idle guarantee: 4 × 2.50 + 4 × 2.50 + 4 × 3.10 + 8 × 3.10 × 11 = $305.20"""
    gpu = rolled_fleet
    cut = NOV2 + timedelta(hours=11)
    before = snapshot(cut, cut + timedelta(hours=1))
    with committed():
        f.make_price_rate(gpu, "3.1000", tier=CapacityTier.RESERVED, effective_from=cut + minutes(30))
    assert snapshot(cut, cut + timedelta(hours=1)) == before
    assert day(NOV2) == money("32.40", "337.60", "305.20")
    assert day(NOV3) == money("24.80", "595.20", "570.40")
    for row in UsageRollup.objects.filter(bucket=HOUR, start__gte=cut + timedelta(hours=1), start__lt=NOV3):
        assert row.cost_usd == at(row.allocated_gpu_seconds, "3.10")
    assert_levels_agree()
    kept = warnings_of(caplog)
    assert len(kept) == 1, kept
    assert kept[0]["bucket"] == "hour"
    assert kept[0]["start"] == "2026-11-02T11:00:00Z"
    assert kept[0]["gpu_type"] == "H100-80GB"
    assert kept[0]["capacity_tier"] == "reserved"
    assert kept[0]["rate_changes_at"] == ["2026-11-02T11:30:00Z"]
    assert set(kept[0]["tables"]) == {"UsageRollup", "FleetRollup", "QuotaRollup"}


def test_time_moved_before_the_first_rate_costs_nothing(rolled_fleet: GpuType, committed: Any) -> None:
    """The only reserved rate now starts at 2 November 12:00: the hours before it are unpriced."""
    gpu = rolled_fleet
    moved = rate(gpu)
    moved.effective_from = NOV2 + timedelta(hours=12)
    with committed():
        moved.save()
    assert day(NOV2) == money("10.00", "240.00", "230.00")
    assert UsageRollup.objects.filter(bucket=HOUR, start__lt=NOV2 + timedelta(hours=12)).aggregate(
        c=Sum("cost_usd"))["c"] == 0
    assert day(NOV3) == money("20.00", "480.00", "460.00")
    assert_levels_agree()


def test_a_change_within_the_minutes_kept_leaves_the_older_rows_alone(rolled_fleet: GpuType, committed: Any,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """$3.10 from 3 November 12:00: 2 November is untouched, 3 November's afternoon repriced."""
    gpu = rolled_fleet
    before = snapshot(NOV2, NOV3)
    with committed():
        f.make_price_rate(gpu, "3.1000", tier=CapacityTier.RESERVED, effective_from=NOV3 + timedelta(hours=12))
    assert snapshot(NOV2, NOV3) == before
    assert day(NOV3) == money("20.00", "537.60", "517.60")  # 8 × 12 × 2.50 + 8 × 12 × 3.10
    assert_levels_agree()
    assert warnings_of(caplog) == []


def test_another_gpu_types_rate_leaves_old_rows_alone(rolled_fleet: GpuType, committed: Any) -> None:
    a100 = f.make_gpu_type("A100-40GB", 40)
    before = snapshot(NOV2, LATER)
    with committed():
        f.make_price_rate(a100, "0.1000", tier=CapacityTier.RESERVED, effective_from=NOV2 - timedelta(days=30))
    assert snapshot(NOV2, LATER) == before
