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
from frontend.store import shared_store
from frontend.tasks import keep_team_days
from frontend.team_stats import DAY_KEY, waits_and_slowdowns

pytestmark = pytest.mark.django_db


def test_keep_team_days_stores_every_whole_day_of_the_longest_window(demo, submit_as):
    shared_store().delete_prefix("qm:team-bins:")
    now = timezone.now()
    job = submit_as("alice", name="old", gpus=1)
    start = now - timedelta(days=12)
    Job.objects.filter(pk=job.pk).update(submitted_at=start - timedelta(minutes=7), started_at=start,
                                         finished_at=start + timedelta(hours=1), state=JobState.SUCCEEDED)
    keep_team_days.apply().get()
    today = int(now.timestamp() // 86400)
    keys = [DAY_KEY.format(measure=m, day=d) for m in ("wait", "slowdown") for d in range(today - 29, today)]
    assert sorted(shared_store().get_many(keys)) == sorted(keys)
    # the page's next 30-day view groups only its two partial days in the database
    with CaptureQueriesContext(connection) as queries:
        waits, _ = waits_and_slowdowns(now - timedelta(days=30), timezone.now())
    assert all(q["sql"].count(" OR ") <= 1 for q in queries.captured_queries)
    assert [row["n"] for row in waits if row["team"] == "vision"] == [1]


def test_keep_team_days_is_on_beats_schedule_within_yesterdays_time_to_live():
    from frontend.team_stats import RECENT_DAY_TTL_S

    app.loader.import_default_modules()  # what a worker does: the task is registered there
    assert "qm.frontend.keep_team_days" in app.tasks
    names = {entry["task"]: entry for entry in app.conf.beat_schedule.values()}
    assert "qm.frontend.keep_team_days" in names
    assert names["qm.frontend.keep_team_days"]["schedule"] < RECENT_DAY_TTL_S
