"""The job page says what an ETA has meant lately beside a waiting job's ETA (the fleet's record
of the last week, services/eta_record.py), and, once a job started, how far from the first ETA
it was told; the live refresh carries the same words."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import Job, PendingPlace

pytestmark = pytest.mark.django_db


def _started(job: Job, *, ago_min: float, told_min_before: float, wait_told_min: float) -> None:
    start = timezone.now() - timedelta(minutes=ago_min)
    told = start + timedelta(minutes=told_min_before)
    Job.objects.filter(pk=job.pk).update(state="running", started_at=start, state_changed_at=start, eta_told=told,
                                         eta_told_at=told - timedelta(minutes=wait_told_min))


def test_a_waiting_job_reads_its_eta_beside_how_far_etas_held_this_week(client_for, submit_as):
    for i, (before, told) in enumerate(((60, 120), (10, 40), (-30, 60))):
        _started(submit_as("bob", name=f"ran{i}", gpus=1), ago_min=100 + i, told_min_before=before,
                 wait_told_min=told)
    waiting = submit_as("alice", name="waits", gpus=8)
    PendingPlace.objects.create(job=waiting, queue_position=1, eta=timezone.now() + timedelta(hours=3))
    client = client_for("alice")

    page = client.get(f"/jobs/{waiting.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{waiting.pk}.json").json()["html"]["job-status"]

    for html in (page, live):
        assert ('id="eta-record">At the latest, by runtime limits: of the 3 jobs that waited with an ETA and started '
                "in the last 7 days, 66.67% started by the first ETA they were told, the median one after 75.0% of "
                'the wait it was told. <span id="eta-likely">At that share of its wait this job would start about ') in html
        assert "(in 2.2 h).</span></span>" in html  # 75 % of its 3 h


def test_a_waiting_job_without_an_eta_or_a_record_reads_no_record(client_for, submit_as):
    waiting = submit_as("alice", name="waits", gpus=8)
    PendingPlace.objects.create(job=waiting, queue_position=1, eta=timezone.now() + timedelta(hours=3))
    assert 'id="eta-record"' not in client_for("alice").get(f"/jobs/{waiting.pk}/").content.decode()


@pytest.mark.parametrize(("before", "words"), [
    (90, "It started 90 min before the first ETA it was told"),
    (-45, "It started 45 min after the first ETA it was told"),
])
def test_a_started_job_says_how_far_from_the_first_eta_it_was_told_it_started(client_for, submit_as, before, words):
    job = submit_as("alice", name="ran", gpus=1)
    _started(job, ago_min=5, told_min_before=before, wait_told_min=120)
    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
    assert words in html
    assert ("the fleet or the queue ahead of it changed after it was told" in html) == (before < 0)
