"""The job page says what an ETA has meant lately beside a waiting job's ETA (the fleet's record
of the last week, services/eta_record.py), and, once a job started, how far from the first ETA
it was told; the live refresh carries the same words. The page and the API's explain (`qm
explain`) read one record, kept a minute in the shared store: they tell the same figures."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import Job, PendingPlace
from controlplane.services import eta_record
from controlplane.shared_store import shared_store

pytestmark = pytest.mark.django_db


def _started(job: Job, *, ago_min: float, told_min_before: float, wait_told_min: float) -> None:
    start = timezone.now() - timedelta(minutes=ago_min)
    told = start + timedelta(minutes=told_min_before)
    Job.objects.filter(pk=job.pk).update(state="running", started_at=start, state_changed_at=start, eta_told=told,
                                         eta_told_at=told - timedelta(minutes=wait_told_min))


def _judged(team_id: int, *, count: int, gpus: int, share: float, wait_told_min: float = 60) -> None:
    """`count` jobs of `gpus` GPUs that started an hour ago after `share` of the wait they were told."""
    template = Job.objects.filter(team_id=team_id).first()
    assert template is not None
    told_at = timezone.now() - timedelta(hours=3)
    Job.objects.bulk_create(
        Job(team_id=team_id, priority_class_id=template.priority_class_id, name=f"ran-{gpus}-{i}", gpus=gpus,
            runtime_limit_s=3600, state="running", submitted_at=told_at, state_changed_at=told_at,
            started_at=told_at + timedelta(minutes=share * wait_told_min),
            eta_told=told_at + timedelta(minutes=wait_told_min), eta_told_at=told_at)
        for i in range(count))


def test_a_waiting_job_reads_its_eta_beside_how_far_etas_held_this_week(client_for, submit_as):
    for i, (before, told) in enumerate(((60, 120), (10, 40), (-30, 60))):
        _started(submit_as("bob", name=f"ran{i}", gpus=1), ago_min=100 + i, told_min_before=before,
                 wait_told_min=told)
    waiting = submit_as("alice", name="waits", gpus=8)
    _judged(waiting.team_id, count=20, gpus=8, share=0.75)  # the demo's nodes hold 8 GPUs: a gang's class
    PendingPlace.objects.create(job=waiting, queue_position=1, eta=timezone.now() + timedelta(hours=3))
    client = client_for("alice")

    page = client.get(f"/jobs/{waiting.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{waiting.pk}.json").json()["html"]["job-status"]

    for html in (page, live):
        assert ('id="eta-record">At the latest, by runtime limits: of the 23 jobs that waited with an ETA and started '
                "in the last 7 days, 95.65% started by the first ETA they were told, the median one after 75% of "
                'the wait it was told. <span id="eta-likely">Of them, the 20 jobs of 8+ GPUs, as this one: 100% '
                "started by their first ETA, the median one after 75% of the wait it was told; at that share of the "
                "wait it was first told this job would start about ") in html
        assert "(in 2.2 h).</span></span>" in html  # 75 % of its 3 h


def test_a_gang_is_told_no_likely_start_by_small_jobs_record(client_for, submit_as):
    small = submit_as("bob", name="small", gpus=1)
    _judged(small.team_id, count=30, gpus=1, share=0.05)  # small jobs start almost at once
    _judged(small.team_id, count=19, gpus=16, share=0.8)  # one gang short of a record of its own
    waiting = submit_as("alice", name="waits", gpus=32)
    PendingPlace.objects.create(job=waiting, queue_position=1, eta=timezone.now() + timedelta(minutes=22))

    html = client_for("alice").get(f"/jobs/{waiting.pk}/").content.decode()

    assert ('<span id="eta-likely">No likely start: only 19 of them asked 8+ GPUs, as this one does, and it takes '
            "20 to tell one (jobs of another size wait differently).</span>") in html
    assert "would start about" not in html


def test_the_page_and_explain_read_one_record_kept_a_minute(client_for, submit_as):
    small = submit_as("bob", name="small", gpus=1)
    _judged(small.team_id, count=30, gpus=1, share=0.05)
    _judged(small.team_id, count=19, gpus=16, share=0.8)
    waiting = submit_as("alice", name="waits", gpus=32)
    PendingPlace.objects.create(job=waiting, queue_position=1, eta=timezone.now() + timedelta(minutes=22))
    client = client_for("alice")
    page = lambda: client.get(f"/jobs/{waiting.pk}/").content.decode()  # noqa: E731
    explain = lambda: client.get(f"/api/v1/jobs/{waiting.pk}/explain/").json()  # noqa: E731
    too_few = "No likely start: only 19 of them asked 8+ GPUs"

    assert too_few in page()  # the page reads the record first
    _judged(small.team_id, count=1, gpus=16, share=0.8)  # the twentieth gang starts within the minute
    told = explain()
    assert told["likely_start"] is None and told["likely_start_missing"]["judged"] == 19  # the page's record
    assert told["likely_start_missing"]["reason"] in page()

    shared_store().delete(eta_record.FLEET_RECORD_KEY)  # the minute passes
    told = explain()  # explain reads it first now
    assert told["likely_start"]["judged"] == 20 and told["likely_start_missing"] is None
    _judged(small.team_id, count=10, gpus=16, share=0.1)  # ten more gangs, far sooner: neither sees them yet
    html = page()
    assert "Of them, the 20 jobs of 8+ GPUs, as this one: 100% started by their first ETA, the median one after " \
           "80% of the wait it was told; at that share of the wait it was first told this job would start about" in html
    assert explain()["eta_record"]["own_class"]["judged"] == 20


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
