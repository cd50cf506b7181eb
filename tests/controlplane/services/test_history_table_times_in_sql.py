"""The history CSV's and workbook's times and elapsed seconds, made by PostgreSQL from 8 Dec
(`job_history._csv_values`: to_char and the span's whole microseconds, where each row's three
times were read as Python times and written back as text), held to the rule they replace
(`_second`, `_elapsed_seconds`: SQLite's path still) value for value over a varied history: times
a microsecond either side of a half second, a day's end and a year's, a year before 1000, an end
before its start, a run of over a thousand years (where a float's rounding could differ from an
exact division), no start, jobs still running or preempting (elapsed to now), one requeued and
waiting; and the whole CSV byte for byte, either way."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services import job_history

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 12, 8, 1, 30, 0, 250_000, tzinfo=UTC)
T = datetime(2026, 11, 30, 23, 59, 59, tzinfo=UTC)
US = timedelta(microseconds=1)
HALF = timedelta(microseconds=500_000)
# (state, submitted, started, finished)
SHAPES = [
    (JobState.SUCCEEDED, T, T + HALF - US, T + HALF),
    (JobState.FAILED, T + HALF - US, T + HALF, T + timedelta(days=3, microseconds=999_999)),
    (JobState.CANCELLED, T, None, T + HALF),
    (JobState.TIMED_OUT, datetime(2026, 12, 31, 23, 59, 59, 500_000, tzinfo=UTC),
     datetime(2026, 12, 31, 23, 59, 59, 499_999, tzinfo=UTC), datetime(2027, 1, 1, 0, 0, 0, 1, tzinfo=UTC)),
    (JobState.SUCCEEDED, datetime(999, 3, 4, 5, 6, 7, 499_999, tzinfo=UTC),
     datetime(1000, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC), T),
    (JobState.FAILED, T, T + timedelta(hours=2), T + timedelta(hours=1, microseconds=700_000)),  # ends before its start
    (JobState.SUCCEEDED, T, T - timedelta(seconds=1, microseconds=1), T),
    (JobState.SUCCEEDED, T, T - timedelta(microseconds=999_999), T),
    (JobState.RUNNING, T, T + timedelta(hours=5, microseconds=123_456), None),
    (JobState.PREEMPTING, T, NOW - timedelta(seconds=3, microseconds=250_001), None),
    (JobState.RUNNING, T, NOW + HALF, None),  # a clock ahead: 0, as the rule says
    (JobState.PENDING, T, None, None),
    (JobState.PENDING, T, T + timedelta(minutes=1), None),  # requeued while its start stood: no elapsed
    (JobState.CANCELLED, T, T + timedelta(minutes=1), None),  # an end never written
]


@pytest.fixture
def varied(fleet: Any) -> list[int]:
    pc = fleet.ml.default_priority_class
    jobs = Job.objects.bulk_create(
        Job(team=fleet.ml, priority_class=pc, submitter=fleet.users["owner"], name=f"shape-{i}", gpus=1,
            runtime_limit_s=3600, state=state, submitted_at=submitted, started_at=started, finished_at=finished,
            state_changed_at=finished or submitted, requeue_count=i % 2)
        for i, (state, submitted, started, finished) in enumerate(SHAPES))
    long = Job.objects.bulk_create([Job(
        team=fleet.ml, priority_class=pc, name="millennium", gpus=1, runtime_limit_s=3600, state=JobState.SUCCEEDED,
        submitted_at=datetime(1001, 1, 1, tzinfo=UTC) + timedelta(microseconds=k * 137_777),
        started_at=datetime(1001, 1, 1, tzinfo=UTC) + timedelta(microseconds=k * 137_777),
        finished_at=T + timedelta(microseconds=k * 999_983), state_changed_at=T) for k in range(200)])
    return [job.pk for job in [*jobs, *long]]


def test_postgresqls_times_are_the_rules_value_for_value(varied: list[int]) -> None:
    in_sql = job_history._csv_values(Job.objects.all(), varied, NOW, times_in_sql=True)
    in_python = job_history._csv_values(Job.objects.all(), varied, NOW, times_in_sql=False)
    assert len(in_sql) == len(varied)
    assert in_sql == in_python
    by_name = {row[1]: row for row in in_sql}
    # the rule, spelled out for a few: half a second rounds up, a microsecond less does not
    assert by_name["shape-0"][7:11] == ("2026-11-30T23:59:59Z", "2026-11-30T23:59:59Z", "2026-12-01T00:00:00Z", 0)
    assert by_name["shape-3"][7:11] == ("2027-01-01T00:00:00Z", "2026-12-31T23:59:59Z", "2027-01-01T00:00:00Z", 0)
    assert by_name["shape-4"][7:9] == ("999-03-04T05:06:07Z", "1000-01-01T00:00:01Z")
    assert by_name["shape-2"][8] is None and by_name["shape-2"][10] is None
    assert by_name["shape-5"][10] == 0 and by_name["shape-6"][10] == 1 and by_name["shape-7"][10] == 0
    assert by_name["shape-9"][10] == 3 and by_name["shape-10"][10] == 0
    assert by_name["shape-11"][10] is None and by_name["shape-12"][10] is None and by_name["shape-13"][10] is None


def test_the_csv_is_the_same_bytes_either_way(varied: list[int], monkeypatch: Any) -> None:
    jobs = job_history.ended_jobs(Job.objects.all())
    now = timezone.now()
    in_sql = "".join(job_history.history_csv(jobs, now))
    monkeypatch.setattr(job_history, "_csv_values", partial(job_history._csv_values, times_in_sql=False))
    in_python = "".join(job_history.history_csv(jobs, now))
    assert in_sql == in_python
    assert in_sql.count("\n") == 1 + 200 + 9 + 1  # header, the ended jobs (nine of the shapes), TOTAL
