"""Finance QA, round 3 (2 Dec): a relative window was shorter than it said. "24h" began 24 hours
before now and ended on the last whole minute rolled, so whenever the rollup (every 15 s) had
not yet finished the current minute, "last 24 hours" covered 23 h 59 min and "30m" 29 minutes
(the demo's 7-day page read "Covers 2026-11-25 06:18:00 UTC to 2026-12-02 06:17:00 UTC"). A
relative window now covers exactly its length, ending where the report ends.

8 GPUs held for two hours at $2.50/GPU-h (the shared fleet's H100 reserved rate).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from controlplane.services import accounting, showback
from controlplane.services.access import Access
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

FINANCE = Access(is_admin=False, is_finance=True, team_ids=frozenset())
#: The rollup ran at 12:00:50; the report is read at 12:01:05, before the next run.
ROLLED = datetime(2026, 12, 1, 12, 0, 50, tzinfo=UTC)
NOW = ROLLED + timedelta(seconds=15)


@pytest.fixture
def held(fleet: Fleet) -> None:
    start = ROLLED - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=8, started_at=start)
    hold(job, [(fleet.nodes[1], 8)], start)
    accounting.catch_up(ROLLED)


@pytest.mark.parametrize(("text", "length"), [("30m", timedelta(minutes=30)), ("1h", timedelta(hours=1)),
                                              ("24h", timedelta(hours=24))])
def test_a_relative_window_covers_its_whole_length(held: None, text: str, length: timedelta) -> None:
    report = showback.showback(showback.parse_window(text, NOW), "team", FINANCE, NOW)

    assert report.end == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # the last whole minute rolled
    assert report.end - report.start == length
    held_s = min(length, timedelta(hours=2) - timedelta(seconds=50)).total_seconds()
    assert report.total.allocated_gpu_seconds == Decimal(8 * held_s)
    body = showback.showback_json(report)
    assert body["totals"]["minutes"] == length.total_seconds() / 60
    assert body["requestedWindow"] == text


def test_windows_of_fixed_instants_keep_their_start(held: None) -> None:
    for window in (showback.parse_window("today", NOW),
                   showback.parse_window("2026-12-01T11:30:00Z,2026-12-01T13:00:00Z", NOW)):
        report = showback.showback(window, "team", FINANCE, NOW)
        assert report.start == window.start and report.end == datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
