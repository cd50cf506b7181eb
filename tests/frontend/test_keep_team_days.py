"""Beat keeps the teams page's days stored, so no view takes the slow path of grouping a month."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.celery import app
from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.shared_store import shared_store
from frontend.tasks import keep_team_days
from frontend.team_stats import DAY_KEY, waits_and_slowdowns

pytestmark = pytest.mark.django_db


def _whole_days_before(day: int) -> list[str]:
    """The store's keys of the 29 whole UTC days a 30-day window ending on `day` holds."""
    return sorted(DAY_KEY.format(measure=m, day=d) for m in ("wait", "slowdown") for d in range(day - 29, day))


def test_keep_team_days_stores_every_whole_day_of_the_longest_window(demo, submit_as):
    shared_store().delete_prefix("qm:team-bins:")
    now = timezone.now()
    job = submit_as("alice", name="old", gpus=1)
    start = now - timedelta(days=12)
    Job.objects.filter(pk=job.pk).update(submitted_at=start - timedelta(minutes=7), started_at=start,
                                         finished_at=start + timedelta(hours=1), state=JobState.SUCCEEDED)
    before = timezone.now()
    keep_team_days.apply().get()
    after = timezone.now()
    # The task reads the clock itself, at some instant in [before, after]: its window ends on that
    # instant's UTC day, which is before's unless midnight fell in between (then it may be
    # after's). Exactly the whole days of one of them are stored, and the view below is asked for
    # a window ending on that same day, as the page would be until the next midnight.
    ends = {int(at.timestamp() // 86400): at for at in (before, after)}
    wanted = sorted({key for day in ends for key in _whole_days_before(day)})
    stored = sorted(shared_store().get_many(wanted))
    day = next((day for day in ends if stored == _whole_days_before(day)), None)
    assert day is not None, (sorted(ends), stored)
    at = ends[day]
    # the page's next 30-day view groups only its two partial days in the database
    with CaptureQueriesContext(connection) as queries:
        waits, _ = waits_and_slowdowns(at - timedelta(days=30), at)
    assert all(q["sql"].count(" OR ") <= 1 for q in queries.captured_queries)
    assert [row["n"] for row in waits if row["team"] == "vision"] == [1]


def test_keep_team_days_is_on_beats_schedule_within_yesterdays_time_to_live():
    from frontend.team_stats import RECENT_DAY_TTL_S

    app.loader.import_default_modules()  # what a worker does: the task is registered there
    assert "qm.frontend.keep_team_days" in app.tasks
    names = {entry["task"]: entry for entry in app.conf.beat_schedule.values()}
    assert "qm.frontend.keep_team_days" in names
    assert names["qm.frontend.keep_team_days"]["schedule"] < RECENT_DAY_TTL_S
