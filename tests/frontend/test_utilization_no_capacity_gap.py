"""An hour with no GPU capacity is a gap on the overview's utilization chart, not the hour before
it held across it.

Operator walk, 8 Dec: with every node retired (or none yet back) for an hour, the accounting has
no fleet rows for that hour (or rows at zero capacity), and the chart left the hour out, so the
step of the hour before held across it: an hour with no fleet read as the last hour's
utilization. Utilization is a share of capacity; with none there is no share of anything, and 0 %
would read as an idle fleet paid for, so the hour is a gap (None) and the caption says what a gap
is."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest

from controlplane.choices import CapacityTier
from controlplane.models import AccountingCursor, FleetRollup, UsageRollup
from controlplane.services import accounting, utilization_series
from controlplane.services.showback import Window
from frontend import figures
from frontend.utilization import utilization_points
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import T0, h100

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)
NOW = T0 + 3 * HOUR  # 13:00; the hours 10:00, 11:00 and 12:00 are rolled


def _hour(start, capacity_gpus: int, allocated_gpus: int, gpu_type) -> FleetRollup:  # type: ignore[no-untyped-def]
    zero = Decimal(0)
    return FleetRollup(
        bucket=accounting.HOUR, start=start, gpu_type=gpu_type, capacity_tier=CapacityTier.RESERVED,
        capacity_gpu_seconds=Decimal(capacity_gpus * 3600), capacity_cost_usd=zero,
        allocated_gpu_seconds=Decimal(allocated_gpus * 3600), active_gpu_seconds=Decimal(allocated_gpus * 1800),
        productive_gpu_seconds=Decimal(allocated_gpus * 900), reported_gpu_seconds=Decimal(allocated_gpus * 3600),
        lost_gpu_seconds=zero, cost_usd=zero, lost_cost_usd=zero)


@pytest.fixture(params=["no rows", "rows at zero"])
def fleet_gone_from_11_to_12(request: pytest.FixtureRequest) -> None:
    gpu = h100()
    rows = [_hour(T0, 16, 8, gpu), _hour(T0 + 2 * HOUR, 16, 4, gpu)]
    if request.param == "rows at zero":  # a node retired after the hour was first rolled: re-derived to 0
        rows.append(_hour(T0 + HOUR, 0, 0, gpu))
    FleetRollup.objects.bulk_create(rows)
    AccountingCursor.objects.update_or_create(name=accounting.CURSOR_NAME, defaults={"rolled_until": NOW})


@pytest.mark.usefixtures("fleet_gone_from_11_to_12")
def test_an_hour_with_no_capacity_is_a_gap_not_the_hour_before_held() -> None:
    points, note = utilization_points(NOW - timedelta(hours=24), NOW, "24h", NOW)

    assert [(p["at"], p["allocated"]) for p in points] == [(T0, 0.5), (T0 + HOUR, None), (T0 + 2 * HOUR, 0.25)]
    assert points[1]["until"] == T0 + 2 * HOUR and points[1]["active"] is None and points[1]["productive"] is None

    chart = figures.utilization_tiers(points, source_note=note, window_end=NOW)
    allocated = next(trace for trace in chart.figure["data"] if trace["name"] == "allocated")
    # 10:00's step drawn to 11:00 and closed there, nothing from 11:00 to 12:00, 12:00's step to 13:00
    assert list(zip(allocated["x"], allocated["y"], strict=True)) == [
        ("2026-11-02 10:00:00", 50.0), ("2026-11-02 11:00:00", 50.0), ("2026-11-02 11:00:00", None),
        ("2026-11-02 12:00:00", 25.0), ("2026-11-02 13:00:00", 25.0)]
    assert "A gap is a stretch with no GPU capacity" in chart.caption
    # the values table says nothing for 11:00, the hour from which there was no fleet
    assert chart.values is not None
    rows = {row[0]: row[1:] for row in chart.values["rows"]}
    assert rows["2026-11-02 11:00:00"] == ["–", "–", "–"]
    assert rows["2026-11-02 10:00:00"][0] == "50%" and rows["2026-11-02 12:00:00"][0] == "25%"


def test_a_chart_with_no_gap_says_nothing_of_gaps() -> None:
    points = [{"at": T0, "until": T0 + HOUR, "allocated": 0.5, "active": 0.25, "productive": 0.1}]
    assert "gap" not in figures.utilization_tiers(points).caption


def test_a_fleet_gone_up_to_now_is_a_gap_up_to_now_not_a_chart_that_stops() -> None:
    gpu = h100()
    FleetRollup.objects.bulk_create([_hour(T0, 16, 8, gpu)])
    AccountingCursor.objects.update_or_create(name=accounting.CURSOR_NAME, defaults={"rolled_until": NOW})

    points, note = utilization_points(NOW - timedelta(hours=24), NOW, "24h", NOW)

    assert [(p["at"], p["allocated"]) for p in points] == [(T0, 0.5), (T0 + HOUR, None), (T0 + 2 * HOUR, None)]
    assert points[-1]["until"] == NOW
    chart = figures.utilization_tiers(points, source_note=note, window_end=NOW)
    # drawn up to the last rollup, which is the window's end: not "3 h before the window's end"
    assert "Drawn from 2026-11-02 10:00:00 UTC to 2026-11-02 13:00:00 UTC." in chart.caption, chart.caption


@pytest.mark.usefixtures("fleet_gone_from_11_to_12")
def test_the_series_says_the_hour_had_no_capacity() -> None:
    """The series the chart and GET metrics/utilization/ read: the hour is there, with 0 GPUs of
    capacity, not left out."""
    series = utilization_series.utilization_series(Window(NOW - timedelta(hours=24), NOW, "24h"), NOW)
    assert [(p.start, p.capacity_gpus, p.allocated_gpus) for p in series] == [
        (T0, 16.0, 8.0), (T0 + HOUR, 0.0, 0.0), (T0 + 2 * HOUR, 16.0, 4.0)]


def test_a_teams_hour_without_gpus_after_its_first_reads_zero_not_the_hour_before() -> None:
    """GET metrics/utilization/?team= reads a team's series: an hour it held no GPU was left out,
    and a reader's step line held the hour before across it (8 Dec)."""
    gpu = h100()
    team = f.make_team("solo")
    job = f.make_job(team)
    zero = Decimal(0)

    def hour(start, gpus: int) -> UsageRollup:  # type: ignore[no-untyped-def]
        return UsageRollup(
            bucket=accounting.HOUR, start=start, job=job, team=team, priority_class=job.priority_class,
            gpu_type=gpu, capacity_tier=CapacityTier.RESERVED, allocated_gpu_seconds=Decimal(gpus * 3600),
            active_gpu_seconds=Decimal(gpus * 1800), productive_gpu_seconds=Decimal(gpus * 900),
            reported_gpu_seconds=Decimal(gpus * 3600), lost_gpu_seconds=zero, cost_usd=zero, lost_cost_usd=zero)

    UsageRollup.objects.bulk_create([hour(T0, 8), hour(T0 + 2 * HOUR, 4)])
    AccountingCursor.objects.update_or_create(name=accounting.CURSOR_NAME, defaults={"rolled_until": NOW})

    series = utilization_series.utilization_series(Window(NOW - timedelta(hours=24), NOW, "24h"), NOW,
                                                   team_id=team.pk)

    assert [(p.start, p.allocated_gpus) for p in series] == [(T0, 8.0), (T0 + HOUR, 0.0), (T0 + 2 * HOUR, 4.0)]
