"""`GET metrics/utilization/?window=30m`: a relative window covers exactly its length, ending on the
last whole minute rolled, as showback's does since 888cbc2 (one rule: showback.rolled_window).
Before, it began that long before now and its points ran from the minute (or hour) of that start
to wherever the rollup stood: with the rollup 15 s behind, `30m` covered 29 min 50 s, or more
than 30 min with the seconds of the minute before the start, and the answer's `window` said
`now − 30 min` to `now`, neither of which the points covered.

8 GPUs held for two hours."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.services import accounting, showback, utilization_series
from controlplane.services.access import Access
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

UTILIZATION = "/api/v1/metrics/utilization/"
#: The rollup ran at 12:00:50; the series is read at 12:01:05, before the next run.
ROLLED = datetime(2026, 12, 1, 12, 0, 50, tzinfo=UTC)
NOW = ROLLED + timedelta(seconds=15)


def _held(fleet: Fleet, rolled: datetime) -> None:
    start = rolled - timedelta(hours=2)
    hold(running_job(fleet.ml, gpus=8, started_at=start), [(fleet.nodes[1], 8)], start)
    accounting.catch_up(rolled)


@pytest.mark.parametrize(("text", "length"), [("30m", timedelta(minutes=30)), ("1h", timedelta(hours=1))])
def test_a_relative_window_covers_its_whole_length_point_by_point(fleet: Fleet, text: str, length: timedelta) -> None:
    _held(fleet, ROLLED)
    window = showback.rolled_window(showback.parse_window(text, NOW))

    assert window.end == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # the last whole minute rolled
    assert window.end - window.start == length
    points = utilization_series.utilization_series(window, NOW, bucket=accounting.MINUTE)
    assert points[0].start == window.start
    assert sum(p.seconds for p in points) == length.total_seconds()
    assert all(p.allocated_gpus == pytest.approx(8) for p in points)


def test_windows_of_fixed_instants_keep_theirs(fleet: Fleet) -> None:
    _held(fleet, ROLLED)
    for window in (showback.parse_window("today", NOW),
                   showback.parse_window("2026-12-01T11:30:00Z,2026-12-01T13:00:00Z", NOW)):
        assert showback.rolled_window(window) == window


def test_the_api_answers_the_window_its_points_cover(fleet: Fleet, clients: dict[str, APIClient]) -> None:
    now = timezone.now()
    _held(fleet, now)
    body = clients["owner"].get(UTILIZATION, {"window": "30m", "bucket": "minute"}).json()

    start, end = (datetime.fromisoformat(body["window"][k].replace("Z", "+00:00")) for k in ("start", "end"))
    assert end == accounting.floor_to(now, accounting.MINUTE)
    assert end - start == timedelta(minutes=30)
    assert body["points"][0]["t"] == body["window"]["start"]
    assert sum(p["seconds"] for p in body["points"]) == 1800
    # the same window showback reads for "30m"
    admin = Access(is_admin=True, is_finance=False, team_ids=frozenset())
    report = showback.showback(showback.parse_window("30m", timezone.now()), "team", admin, timezone.now())
    assert (report.start, report.end) == (start, end)
