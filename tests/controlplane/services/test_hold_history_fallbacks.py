"""`services.holds.hold_history` when a hold's event is missing (a row from before holds wrote
their events, a row edited by hand): each fallback on its own.

Every hold and release writes its event since 30 Nov 2026, so the what-if replay's other tests
(tests/frontend/test_what_if_holds_and_dependencies.py) never reach these paths: without them a
job whose hold no event placed replays as never held and starts at once, and one released with
no hold recorded loses the stretch it was held."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobHold, JobState
from controlplane.models import Job
from controlplane.services.holds import HoldStretch, hold_history
from controlplane.services.transitions import record_event
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db


def _job(fleet: Fleet, hours_ago: float, **fields: object) -> Job:
    return f.make_job(fleet.ml, submitted_at=timezone.now() - timedelta(hours=hours_ago),
                      submitter=fleet.users["owner"], **fields)


def _event(job: Job, kind: EventKind, at: object, data: dict[str, object]) -> None:
    record_event(kind, "user:alice", job=job, at=at, data=data)


# ------------------------------------------------------------- a release with no hold before it


def test_a_release_with_no_hold_recorded_is_a_hold_from_submission_to_it_by_whom_it_says(fleet: Fleet) -> None:
    job = _job(fleet, 3)
    released = job.submitted_at + timedelta(hours=1)
    _event(job, EventKind.JOB_RELEASED, released, {"was": "admin root"})

    history = hold_history([job.pk], until=timezone.now())

    assert history[job.pk] == (HoldStretch(job.submitted_at, released, "admin root"),)


def test_a_release_with_no_hold_recorded_that_names_no_holder_is_a_users(fleet: Fleet) -> None:
    job = _job(fleet, 3)
    released = job.submitted_at + timedelta(hours=1)
    _event(job, EventKind.JOB_RELEASED, released, {})

    assert hold_history([job.pk], until=timezone.now())[job.pk] == (HoldStretch(job.submitted_at, released, "a user"),)


def test_only_a_first_release_with_no_hold_recorded_stands_for_one(fleet: Fleet) -> None:
    # held and released with their events, then a stray release: the stray one is no new stretch
    # from submission (it would overlap the recorded one), so the history keeps the one recorded
    job = _job(fleet, 4)
    held, released = job.submitted_at + timedelta(hours=1), job.submitted_at + timedelta(hours=2)
    _event(job, EventKind.JOB_HELD, held, {"hold": JobHold.USER, "held_by": "alice"})
    _event(job, EventKind.JOB_RELEASED, released, {"was": "alice"})
    _event(job, EventKind.JOB_RELEASED, released + timedelta(minutes=30), {"was": "alice"})

    assert hold_history([job.pk], until=timezone.now())[job.pk] == (HoldStretch(held, released, "alice"),)


# ------------------------------------------------------------ a hold on the row that no event placed


def test_a_hold_the_row_has_that_no_event_placed_is_held_from_its_held_at_to_the_end(fleet: Fleet) -> None:
    held = timezone.now() - timedelta(hours=2)
    job = _job(fleet, 3, hold=JobHold.ADMIN, held_at=held, held_by=fleet.users["admin"])

    assert hold_history([job.pk], until=timezone.now())[job.pk] == (HoldStretch(held, None, "admin root"),)


def test_a_hold_no_event_placed_on_a_job_that_ended_held_lasts_to_its_end(fleet: Fleet) -> None:
    held, ended = timezone.now() - timedelta(hours=2), timezone.now() - timedelta(hours=1)
    job = _job(fleet, 3, hold=JobHold.USER, held_at=held, held_by=fleet.users["owner"], state=JobState.CANCELLED,
               finished_at=ended)

    assert hold_history([job.pk], until=timezone.now())[job.pk] == (HoldStretch(held, ended, "alice"),)


def test_a_hold_no_event_placed_counts_only_from_before_the_time_asked_about(fleet: Fleet) -> None:
    held = timezone.now() - timedelta(hours=1)
    job = _job(fleet, 3, hold=JobHold.USER, held_at=held, held_by=fleet.users["owner"])

    assert job.pk not in hold_history([job.pk], until=held)
    assert hold_history([job.pk], until=held + timedelta(seconds=1))[job.pk] == (HoldStretch(held, None, "alice"),)


def test_a_hold_its_event_placed_is_not_read_again_from_the_row(fleet: Fleet) -> None:
    # the row's held_at is the event's time written again: one stretch, from the event
    held = timezone.now() - timedelta(hours=2)
    job = _job(fleet, 3, hold=JobHold.USER, held_at=held + timedelta(minutes=5), held_by=fleet.users["owner"])
    _event(job, EventKind.JOB_HELD, held, {"hold": JobHold.USER, "held_by": "alice"})

    assert hold_history([job.pk], until=timezone.now())[job.pk] == (HoldStretch(held, None, "alice"),)
