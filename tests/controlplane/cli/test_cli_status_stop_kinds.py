"""`qm status` of a job requeued by a stop that was no preemption: its notice is a `job.stopping`
now (migration 0032), a `job.preempting` with the same reason in databases of earlier versions.
Either way a resize is said as one (`last resized`, it printed `last preempted`), a requeue
someone asked for as `requeue asked`, a gang member's exit not at all, and a real preemption as
`last preempted`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow

OLD = pytest.mark.parametrize("notice_kind", [EventKind.JOB_STOPPING, EventKind.JOB_PREEMPTING],
                              ids=["job.stopping", "job.preempting before 0032"])


def _lines(out: str) -> dict[str, str]:
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in out.splitlines()) if v}


def _requeued(fleet, notice_kind: str, reason: str, message: str, requeue_kind: str, **job: object) -> Job:
    at = timezone.now() - timedelta(hours=1)
    made = f.make_job(fleet.ml, name="train", gpus=8, state=JobState.PENDING, requeue_count=1,
                      submitter=fleet.users["owner"], **job)
    Event.objects.create(created_at=at, kind=notice_kind, actor="scheduler@epoch:1", reason=reason, job=made,
                         team=fleet.ml, message=message, data={"generation": 4, "grace_period_s": 30})
    Event.objects.create(created_at=at + timedelta(seconds=20), kind=requeue_kind, actor="agent:h100-0",
                         reason=reason, job=made, team=fleet.ml, message=f"Requeued whole after: {reason}")
    return made


@OLD
def test_a_resize_is_printed_as_a_resize(alice_qm, fleet, notice_kind: str) -> None:
    job = _requeued(fleet, notice_kind, "Resized", "Shrinks from 8 to 4 GPUs for job 99", EventKind.JOB_RESIZED)

    r = alice_qm("status", str(job.pk))

    assert r.code == 0, r.err
    fields = _lines(r.out)
    assert "last preempted" not in fields and "requeue asked" not in fields, r.out
    assert "Shrinks from 8 to 4 GPUs for job 99" in fields["last resized"], r.out
    assert "Requeued whole after: Resized" in fields["requeued"], r.out


@OLD
def test_a_requeue_asked_for_is_printed_as_asked(alice_qm, fleet, notice_kind: str) -> None:
    job = _requeued(fleet, notice_kind, "Requeued", "Requeued by alice: h100-1 is flaky; its processes get 30 s",
                    EventKind.JOB_REQUEUED)

    r = alice_qm("status", str(job.pk))

    assert r.code == 0, r.err
    fields = _lines(r.out)
    assert "last preempted" not in fields, r.out
    assert "Requeued by alice: h100-1 is flaky" in fields["requeue asked"], r.out


@OLD
def test_a_gang_members_exit_is_printed_as_no_preemption(alice_qm, fleet, notice_kind: str) -> None:
    at = timezone.now() - timedelta(hours=1)
    job = f.make_job(fleet.ml, name="pretrain", gpus=16, gpus_per_node=8, state=JobState.SUCCEEDED, exit_code=0,
                     requeue_count=1, started_at=at, finished_at=at + timedelta(minutes=10),
                     submitter=fleet.users["owner"])
    Event.objects.create(created_at=at, kind=EventKind.JOB_REQUEUED, actor="agent:h100-05", reason="Fenced",
                         message="Requeued whole after being fenced off a node whose agent shut down", job=job,
                         team=fleet.ml)
    Event.objects.create(created_at=at + timedelta(minutes=10), kind=notice_kind, actor="agent:h100-01",
                         reason="GangMemberExited", job=job, team=fleet.ml,
                         message="The gang member on h100-01 exited with code 0; the rest of the gang gets 30 s to exit")

    r = alice_qm("status", str(job.pk))

    assert r.code == 0, r.err
    assert "last preempted" not in r.out and "last resized" not in r.out and "gang member" not in r.out, r.out
    assert "Requeued whole after being fenced off a node" in r.out, r.out


def test_a_real_preemption_is_printed_as_one(alice_qm, fleet) -> None:
    job = _requeued(fleet, EventKind.JOB_PREEMPTING, "Preempted", "Preempted: higher-priority job 99 needs its GPUs",
                    EventKind.JOB_PREEMPTED, preemption_count=1)

    r = alice_qm("status", str(job.pk))

    assert r.code == 0, r.err
    assert "Preempted: higher-priority job 99 needs its GPUs" in _lines(r.out)["last preempted"], r.out
