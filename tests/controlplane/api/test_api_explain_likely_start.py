"""`GET jobs/{id}/explain/` gives a waiting job's likely start by the fleet's ETA record
(`likely_start`: when, the median share of the wait told it uses, the counts it rests on), the
figure the job's page says and `qm explain` prints; null when there is nothing to say."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def team():
    return f.make_team("ml")


@pytest.fixture
def api(team) -> APIClient:
    client = APIClient()
    client.force_authenticate(f.make_user("alice", team=team))
    return client


def started(team, *, wait_min: float, wait_told_min: float) -> None:
    """A job that started a while ago after `wait_min` of the `wait_told_min` it was told."""
    told_at = timezone.now() - timedelta(hours=3)
    job = f.make_job(team, state="running")
    Job.objects.filter(pk=job.pk).update(started_at=told_at + timedelta(minutes=wait_min),
                                         eta_told=told_at + timedelta(minutes=wait_told_min), eta_told_at=told_at)


def test_a_waiting_job_is_told_where_its_start_lands_at_the_median_share_of_the_wait_told(api, team):
    started(team, wait_min=30, wait_told_min=120)  # 0.25 of it
    started(team, wait_min=60, wait_told_min=120)  # 0.5: the median of three
    started(team, wait_min=150, wait_told_min=100)  # 1.5, late
    eta = timezone.now() + timedelta(hours=4)
    waiting = f.make_job(team, pending_code="InsufficientGpus", queue_position=1, eta=eta)

    before = timezone.now()
    body = api.get(f"/api/v1/jobs/{waiting.pk}/explain/").json()
    after = timezone.now()

    likely = body["likely_start"]
    assert likely["share_of_wait"] == pytest.approx(0.5)
    assert likely["judged"] == 3 and likely["on_time"] == pytest.approx(2 / 3) and likely["days"] == 7
    at = parse_datetime(likely["at"])
    assert before + (eta - before) / 2 <= at <= after + (eta - after) / 2  # halfway from now to its ETA


def test_no_likely_start_without_a_record_an_eta_or_a_share_below_one(api, team):
    no_record = f.make_job(team, pending_code="InsufficientGpus", queue_position=1,
                           eta=timezone.now() + timedelta(hours=1))
    assert api.get(f"/api/v1/jobs/{no_record.pk}/explain/").json()["likely_start"] is None

    started(team, wait_min=150, wait_told_min=100)  # the only one: late, a share above one
    assert api.get(f"/api/v1/jobs/{no_record.pk}/explain/").json()["likely_start"] is None

    started(team, wait_min=10, wait_told_min=100)
    started(team, wait_min=20, wait_told_min=100)  # the median now 0.2
    no_eta = f.make_job(team, pending_code="InsufficientGpus", queue_position=2)
    assert api.get(f"/api/v1/jobs/{no_eta.pk}/explain/").json()["likely_start"] is None
    running = f.make_job(team, state="running")
    assert api.get(f"/api/v1/jobs/{running.pk}/explain/").json()["likely_start"] is None
    assert api.get(f"/api/v1/jobs/{no_record.pk}/explain/").json()["likely_start"]["share_of_wait"] == \
        pytest.approx(0.2)
