"""The first ETA a waiting job is told is kept through its wait and, at its start, on the job:
what `GET metrics/etas/`, the job's `eta_told` and the job page say about how far ETAs hold.

On PostgreSQL through the real cycle: one 8-GPU node, a 2-hour job on it, a job behind it told
"at the latest when the first one's limit ends", which then ends after 30 minutes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import Allocation, Job, PendingPlace, Team
from controlplane.services import cycle, eta_record, holds, transitions
from controlplane.services.cycle import _write_places
from controlplane.services.snapshot import BIND_GUARD_COLUMNS
from tests.controlplane import factories as f
from tests.controlplane.eta_fixtures import one_node_team, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_node(db: Any) -> Team:
    return one_node_team()


def test_a_job_keeps_the_first_eta_it_was_told_and_is_judged_by_it_at_its_start(one_node: Team) -> None:
    t0 = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    first = submit(one_node, "first", 2 * 3600, t0 - timedelta(seconds=10))
    assert cycle.run_cycle("w", now=t0).binds == 1
    behind = submit(one_node, "behind", 3600, t0 + timedelta(seconds=30))

    cycle.run_cycle("w", now=t0 + timedelta(seconds=60))
    place = PendingPlace.objects.get(job=behind)
    told = t0 + timedelta(hours=2)  # the first job's runtime limit ends
    assert place.eta == told and place.first_eta == told and place.first_eta_at == t0 + timedelta(seconds=60)
    cycle.run_cycle("w", now=t0 + timedelta(seconds=120))
    place.refresh_from_db()
    assert place.first_eta_at == t0 + timedelta(seconds=60)  # told once, not each cycle

    allocation = Allocation.objects.get(job=first)
    assert transitions.complete_release(allocation.pk, exit_code=0, at=t0 + timedelta(minutes=30), actor="test")
    assert cycle.run_cycle("w", now=t0 + timedelta(minutes=30)).binds == 1

    behind.refresh_from_db()
    assert behind.state == JobState.RUNNING and behind.started_at == t0 + timedelta(minutes=30)
    assert (behind.eta_told, behind.eta_told_at) == (told, t0 + timedelta(seconds=60))
    assert not PendingPlace.objects.filter(job=behind).exists()
    first.refresh_from_db()
    assert first.eta_told is None  # it never waited with an ETA

    record = eta_record.track_record(now=t0 + timedelta(hours=1))
    assert (record.judged, record.on_time, record.late_max_s) == (1, 1.0, 0.0)
    assert record.median_early_s == 90 * 60  # started at 0:30, told 2:00
    assert record.median_share_of_wait == pytest.approx((30 * 60 - 60) / (2 * 3600 - 60))

    api = APIClient()
    api.force_authenticate(f.make_user("boss", superuser=True))
    body = api.get(f"/api/v1/jobs/{behind.pk}/").json()
    assert body["eta_told"] is not None and body["eta_told_at"] is not None
    assert datetime.fromisoformat(body["eta_told"].replace("Z", "+00:00")) == told
    assert api.get(f"/api/v1/jobs/{first.pk}/").json()["eta_told"] is None


def test_a_first_eta_is_kept_as_the_eta_moves_and_fills_only_an_empty_one(one_node: Team) -> None:
    at = timezone.now().replace(microsecond=0)
    job = submit(one_node, "waits", 3600, at)
    eta1, eta2 = at + timedelta(hours=1), at + timedelta(hours=3)

    _write_places([(job.pk, 3, None, "")], at)  # no ETA yet: nothing told
    place = PendingPlace.objects.get(job=job)
    assert place.first_eta is None and place.first_eta_at is None
    _write_places([(job.pk, 2, eta1, "")], at + timedelta(seconds=5))
    _write_places([(job.pk, 2, eta2, "")], at + timedelta(seconds=10))  # the queue ahead grew
    _write_places([(job.pk, 1, None, "")], at + timedelta(seconds=15))  # and no estimate this cycle
    place.refresh_from_db()
    assert place.eta is None and place.queue_position == 1
    assert (place.first_eta, place.first_eta_at) == (eta1, at + timedelta(seconds=5))


def test_a_hold_ends_the_stay_in_the_queue_and_the_next_one_is_told_afresh(one_node: Team) -> None:
    at = timezone.now().replace(microsecond=0)
    job = submit(one_node, "held", 3600, at)
    _write_places([(job.pk, 1, at + timedelta(hours=1), "")], at)
    boss = f.make_user("boss", superuser=True)
    holds.hold(boss, job.pk)
    assert not PendingPlace.objects.filter(job=job).exists()
    holds.release(boss, job.pk)
    _write_places([(job.pk, 1, at + timedelta(hours=5), "")], at + timedelta(hours=1))
    place = PendingPlace.objects.get(job=job)
    assert (place.first_eta, place.first_eta_at) == (at + timedelta(hours=5), at + timedelta(hours=1))


def test_a_cycle_that_read_a_job_before_its_hold_writes_it_no_place(one_node: Team) -> None:
    """Found on the demo: a cycle running when a job was held wrote its place after the hold had
    taken it out of the queue, and the page said "held … in 8 min" until the next cycle."""
    at = timezone.now().replace(microsecond=0)
    job = submit(one_node, "held meanwhile", 3600, at)
    read = {str(pk): row for pk, *row in Job.objects.filter(pk=job.pk).values_list("pk", *BIND_GUARD_COLUMNS)}
    boss = f.make_user("boss", superuser=True)
    holds.hold(boss, job.pk)  # after the cycle's read, before its write
    _write_places([(job.pk, 1, at + timedelta(hours=1), "")], at, read)
    assert not PendingPlace.objects.filter(job=job).exists()

    # Held as read: its place (out of line, after every queued job) is written as every cycle does.
    held = {str(pk): row for pk, *row in Job.objects.filter(pk=job.pk).values_list("pk", *BIND_GUARD_COLUMNS)}
    _write_places([(job.pk, 4, None, "")], at, held)
    assert PendingPlace.objects.get(job=job).queue_position == 4
    holds.release(boss, job.pk)  # released after that read: the held place is not written again
    PendingPlace.objects.filter(job=job).delete()
    _write_places([(job.pk, 4, None, "")], at, held)
    assert not PendingPlace.objects.filter(job=job).exists()


def test_a_requeued_job_shows_no_eta_told_until_it_starts_again(one_node: Team) -> None:
    job = submit(one_node, "again", 3600, timezone.now())
    told = timezone.now().replace(microsecond=0)
    Job.objects.filter(pk=job.pk).update(state=JobState.PENDING, started_at=None, eta_told=told, eta_told_at=told)
    api = APIClient()
    api.force_authenticate(f.make_user("boss", superuser=True))
    body = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["eta_told"] is None and body["eta_told_at"] is None  # the last run's, not this wait's
    assert eta_record.started_against_told(Job.objects.get(pk=job.pk)) is None
