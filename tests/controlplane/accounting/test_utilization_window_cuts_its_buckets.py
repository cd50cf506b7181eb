"""`GET metrics/utilization/` averages each bucket over the part of it inside the window: an hour
(or a day) the window cuts is read from the finer rows inside the window, as showback's cost
chart reads its cut bars (frontend/showback_data.py), not whole.

Demo walk, 7 Dec: `?window=2026-12-07T01:00:00Z,2026-12-07T01:16:00Z&bucket=hour` answered one
point of 430 s and 86.4 GPUs allocated: the whole hour row, up to where the rollup stood at
01:21:54, five minutes past the window's end; the minutes of that window averaged 40.7 GPUs over
76 s. Any window that did not begin and end on whole hours (days) was so read, its first and last
buckets counting time outside it.

8 GPUs held from 10:00 to 11:20; the rollup ran to 12:00:50."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.services import accounting, utilization_series
from controlplane.services.showback import Window
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

UTILIZATION = "/api/v1/metrics/utilization/"
ROLLED = datetime(2026, 12, 1, 12, 0, 50, tzinfo=UTC)
NOW = ROLLED + timedelta(seconds=15)
TEN = datetime(2026, 12, 1, 10, tzinfo=UTC)


def _held_until_11_20(fleet: Fleet, start: datetime = TEN, rolled: datetime = ROLLED) -> None:
    hold(running_job(fleet.ml, gpus=8, started_at=start), [(fleet.nodes[1], 8)], start,
         start + timedelta(hours=1, minutes=20))
    accounting.catch_up(rolled)


def _mean(points: list[utilization_series.UtilizationPoint], tier: str) -> float:
    return sum(getattr(p, tier) * p.seconds for p in points) / sum(p.seconds for p in points)


@pytest.mark.parametrize("bucket", [accounting.HOUR, accounting.DAY])
def test_a_bucket_the_window_cuts_counts_only_the_windows_part(fleet: Fleet, bucket: int) -> None:
    _held_until_11_20(fleet)
    window = Window(TEN + timedelta(hours=1), TEN + timedelta(hours=1, minutes=20), "custom")

    points = utilization_series.utilization_series(window, NOW, bucket=bucket)

    assert len(points) == 1
    assert points[0].seconds == 20 * 60   # 11:00 to 11:20, not to the rollup's 12:00:50
    assert points[0].allocated_gpus == pytest.approx(8)   # it said 8 × 20 min / 60 min 50 s


def test_hour_buckets_average_what_the_windows_minutes_do(fleet: Fleet) -> None:
    _held_until_11_20(fleet)
    window = Window(TEN + timedelta(minutes=50), TEN + timedelta(hours=1, minutes=40), "custom")   # 10:50 to 11:40

    hours = utilization_series.utilization_series(window, NOW, bucket=accounting.HOUR)
    minutes = utilization_series.utilization_series(window, NOW, bucket=accounting.MINUTE)

    assert [p.start for p in hours] == [TEN, TEN + timedelta(hours=1)]   # each point still names its hour
    assert [p.seconds for p in hours] == [10 * 60, 40 * 60]
    assert sum(p.seconds for p in hours) == sum(p.seconds for p in minutes) == 50 * 60
    for tier in ("capacity_gpus", "allocated_gpus"):
        assert _mean(hours, tier) == pytest.approx(_mean(minutes, tier))
    assert hours[0].allocated_gpus == pytest.approx(8) and hours[1].allocated_gpus == pytest.approx(4)


def test_the_api_answers_the_windows_part_of_its_hour(fleet: Fleet, clients: dict[str, APIClient]) -> None:
    hour = accounting.floor_to(timezone.now(), accounting.HOUR) - timedelta(hours=3)
    _held_until_11_20(fleet, start=hour - timedelta(hours=1), rolled=timezone.now())
    window = f"{hour:%Y-%m-%dT%H:%M:%SZ},{hour + timedelta(minutes=20):%Y-%m-%dT%H:%M:%SZ}"

    body = clients["owner"].get(UTILIZATION, {"window": window, "bucket": "hour"}).json()

    assert [(p["seconds"], p["allocatedGpus"]) for p in body["points"]] == [(1200.0, 8.0)], body


@pytest.mark.parametrize("bucket", [accounting.MINUTE, accounting.HOUR])
def test_a_window_ending_inside_a_minute_reads_no_more_gpus_than_were_held(fleet: Fleet, bucket: int) -> None:
    """A minute has no finer rows, so a window ending at 10:30:20 reads the 10:30 minute whole;
    it must average it over the whole minute too. Averaged over the window's 20 s of it, the
    8 GPUs held read 24 and the fleet's capacity three times itself (demo walk, 8 Dec:
    `?window=…00:42:10Z,…00:42:50Z&bucket=minute` said 207.3 GPUs of capacity on a 128-GPU fleet).
    In hours the 10:30 minute is the cut hour's last finer row and counts whole the same way."""
    _held_until_11_20(fleet)
    window = Window(TEN + timedelta(minutes=29), TEN + timedelta(minutes=30, seconds=20), "custom")

    points = utilization_series.utilization_series(window, NOW, bucket=bucket)

    assert sum(p.seconds for p in points) == 120        # 10:29 and 10:30, whole minutes
    assert all(p.allocated_gpus == pytest.approx(8) for p in points), points
    capacity = sum(n.gpu_count for n in fleet.nodes)
    assert all(p.capacity_gpus <= capacity for p in points), points
