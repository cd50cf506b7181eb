"""`qm status` of a gang job that was requeued off a lost node, ran again and ended by itself:
its last stop was a gang member's exit ("The gang member on h100-01 exited with code 0; the
rest of the gang gets 30 s to exit", a `job.preempting` notice with reason GangMemberExited),
and qm status printed it as "last preempted:", for a job never preempted, and lost the requeue
line. The last preemption is a stop that put it back in the queue; the requeue is said."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_a_gang_members_exit_is_not_printed_as_a_preemption(alice_qm, fleet) -> None:
    at = timezone.now() - timedelta(hours=1)
    job = f.make_job(fleet.ml, name="pretrain", gpus=16, gpus_per_node=8, state=JobState.SUCCEEDED, exit_code=0,
                     requeue_count=1, started_at=at, finished_at=at + timedelta(minutes=10),
                     submitter=fleet.users["owner"])
    Event.objects.create(created_at=at, kind=EventKind.JOB_REQUEUED, actor="agent:h100-05", reason="Fenced",
                         message="Requeued whole after being fenced off a node whose agent shut down", job=job,
                         team=fleet.ml)
    Event.objects.create(created_at=at + timedelta(minutes=10), kind=EventKind.JOB_PREEMPTING, actor="agent:h100-01",
                         reason="GangMemberExited", job=job, team=fleet.ml,
                         message="The gang member on h100-01 exited with code 0; the rest of the gang gets 30 s to exit")

    r = alice_qm("status", str(job.pk))

    assert r.code == 0, r.err
    assert "last preempted" not in r.out and "gang member" not in r.out, r.out
    assert "Requeued whole after being fenced off a node" in r.out, r.out
