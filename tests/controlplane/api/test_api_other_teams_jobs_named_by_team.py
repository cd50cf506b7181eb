"""Other teams' jobs are named by their team only, wherever a sentence names a job.

Found by an audit: a member of ml read "It fits only on GPUs reserved for job 333" and
"Preempted: higher-priority job 282 (production, 100) needs 8 GPUs" about jobs of team vision,
while the docs promise that other teams' work shows only as counts and team names (the node page
says "a job of team vision"). The stored sentences keep the ids (admins, the audit trail); what a
reader is told names a job they may not read as "a job of team vision"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import (
    Allocation,
    AllocationGpu,
    Job,
    NotificationDelivery,
    NotificationHook,
    SchedulerLease,
)
from controlplane.services import job_mentions
from controlplane.services.transitions import RELEASE_PREEMPTED, signal_stop
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _waiting_behind(fleet, theirs: Job) -> Job:
    return f.make_job(fleet.ml, gpus=8, pending_code="InsufficientGpus",
                      pending_words=f"Needs 8 H100-80GB GPUs; 0 are free (8 more are idle, held for job {theirs.pk}'s "
                                    f"reservation). It fits only on GPUs reserved for job {theirs.pk}.")


def _preempted_by(fleet, theirs: Job) -> tuple[Job, str]:
    SchedulerLease.objects.get_or_create(epoch=1)
    started = timezone.now() - timedelta(hours=1)
    job = f.make_job(fleet.ml, gpus=2, state=JobState.RUNNING, started_at=started, submitter=fleet.users["owner"])
    k = Allocation.objects.count()  # generations and held GPUs are unique fleet-wide
    allocation = Allocation.objects.create(job=job, generation=k + 3, epoch=1, created_at=started, started_at=started)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=fleet.nodes[1 + k // 4],
                                                    gpu_index=k % 4 * 2 + i) for i in range(2))
    notice = f"Preempted: higher-priority job {theirs.pk} (production, 1000) needs 2 GPUs"
    assert signal_stop(allocation.pk, allocation.generation, reason=RELEASE_PREEMPTED, grace_period_s=30,
                       at=timezone.now(), actor="scheduler", message=notice)
    return job, notice


def test_a_waiting_jobs_reason_names_another_teams_job_by_its_team_only(fleet, alice, admin) -> None:
    theirs = f.make_job(fleet.vision, gpus=8)
    mine = _waiting_behind(fleet, theirs)

    said = alice.get(f"{J}/jobs/{mine.pk}/").json()["pending_message"]
    explained = alice.get(f"{J}/jobs/{mine.pk}/explain/").json()["reason"]
    listed = next(j for j in alice.get(f"{J}/jobs/").json()["results"] if j["id"] == mine.pk)["pending_message"]

    assert said == explained == listed == (
        "Needs 8 H100-80GB GPUs; 0 are free (8 more are idle, held for the reservation of a job of team vision). "
        "It fits only on GPUs reserved for a job of team vision.")
    assert f"job {theirs.pk}" not in said
    # an admin reads every team: the ids stay, as stored
    assert admin.get(f"{J}/jobs/{mine.pk}/").json()["pending_message"] == Job.objects.get(pk=mine.pk).pending_message


def test_a_preemption_notice_names_the_preemptor_by_its_team_for_the_victims_team(fleet, alice, admin) -> None:
    theirs = f.make_job(fleet.vision, gpus=2)
    victim, notice = _preempted_by(fleet, theirs)

    events = alice.get(f"{J}/events/", {"job": victim.pk}).json()["results"]
    preempting = next(e for e in events if e["kind"] == "job.preempting")
    explained = alice.get(f"{J}/jobs/{victim.pk}/explain/").json()["reason"]

    told = "Preempted: a higher-priority job of team vision (production, 1000) needs 2 GPUs"
    assert preempting["message"].startswith(told)
    assert told in explained and f"job {theirs.pk}" not in explained
    assert next(e for e in admin.get(f"{J}/events/", {"job": victim.pk}).json()["results"]
                if e["kind"] == "job.preempting")["message"].startswith(notice)


def test_a_job_of_the_readers_own_team_keeps_its_id(fleet, alice) -> None:
    ours = f.make_job(fleet.ml, gpus=8)
    mine = _waiting_behind(fleet, ours)

    assert f"reserved for job {ours.pk}." in alice.get(f"{J}/jobs/{mine.pk}/").json()["pending_message"]


def test_the_job_page_says_other_teams_jobs_by_their_team(fleet) -> None:
    theirs = f.make_job(fleet.vision, gpus=8)
    mine = _waiting_behind(fleet, theirs)
    page = Client()
    assert page.login(username="alice", password="alice")

    html = page.get(f"/jobs/{mine.pk}/").content.decode()

    assert "It fits only on GPUs reserved for a job of team vision." in html
    assert f"job {theirs.pk}" not in html


def test_a_hooks_delivery_names_other_teams_jobs_by_their_team(fleet) -> None:
    theirs = f.make_job(fleet.vision, gpus=2)
    hook = NotificationHook.objects.create(user=fleet.users["owner"], url="https://hooks.example.org/qm",
                                           events=["preempted"], secret="s3cret-of-the-hook", created_at=timezone.now())
    victim, _ = _preempted_by(fleet, theirs)

    payload = NotificationDelivery.objects.get(hook=hook, job=victim).payload

    assert payload["message"].startswith("Preempted: a higher-priority job of team vision (production, 1000)")
    assert f"job {theirs.pk}" not in payload["text"]


def test_lists_of_jobs_keep_the_readable_ids_and_count_the_others_by_team(fleet) -> None:
    ours = f.make_job(fleet.ml)
    vision = [f.make_job(fleet.vision) for _ in range(2)]
    reader = job_mentions.JobMentions(readable_teams=frozenset({fleet.ml.pk}))

    assert reader.say(f"Preempting jobs {ours.pk}, {vision[0].pk}, {vision[1].pk} to start on 8 GPUs") == (
        f"Preempting job {ours.pk} and 2 jobs of team vision to start on 8 GPUs")
    assert reader.say(f"Waits for jobs {vision[0].pk}, {vision[1].pk}, already stopping") == (
        "Waits for 2 jobs of team vision, already stopping")
    assert reader.say(f"Job {vision[0].pk} has run 30 s of its 600 s minimum runtime") == (
        "A job of team vision has run 30 s of its 600 s minimum runtime")
    # an id naming no job tells nothing, and numbers that are no job's stay
    assert reader.say("job 999999 starts; 24 GPUs free, none with 8 on one node") == (
        "job 999999 starts; 24 GPUs free, none with 8 on one node")


def test_a_page_of_jobs_or_events_learns_the_named_jobs_teams_in_one_query(fleet, alice) -> None:
    page = Client()
    assert page.login(username="alice", password="alice")

    def queries() -> tuple[int, ...]:
        counts = []
        for client, path in ((alice, f"{J}/jobs/"), (alice, f"{J}/events/"), (page, "/jobs/")):
            with CaptureQueriesContext(connection) as seen:
                assert client.get(path).status_code == 200
            counts.append(len(seen))
        return tuple(counts)

    _waiting_behind(fleet, f.make_job(fleet.vision, gpus=8))
    _preempted_by(fleet, f.make_job(fleet.vision, gpus=2))
    few = queries()
    for _ in range(4):
        _waiting_behind(fleet, f.make_job(fleet.vision, gpus=8))
        _preempted_by(fleet, f.make_job(fleet.vision, gpus=2))
    assert queries() == few
