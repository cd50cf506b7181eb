"""The job page, its timeline and the overview's preemption count for a stop that is no
preemption: an elastic job's resize, a requeue someone asked for, a gang member's exit. Their
notice is a `job.stopping` now (migration 0032); before, a `job.preempting` with the same reason,
and the page said "Being preempted" for a resize it was stopping. Each reads the same for a new
notice as for an old one (rewritten here to the kind a control plane before 0032 stored), and
only a real preemption reads as one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node
from controlplane.services import agent_protocol, requeue, transitions
from controlplane.services.cycle import run_cycle
from frontend.fleet_series import lost_work_since
from frontend.timeline import state_segments
from frontend.views.jobs import last_preemption

pytestmark = pytest.mark.django_db

OLD = pytest.mark.parametrize("old", [False, True], ids=["job.stopping", "job.preempting before 0032"])
RESIZE = "Shrinks from 8 to 4 GPUs for job 99; it has 60 s to checkpoint and stop, then is bound again at 4 GPUs."


def as_before_0032(job: Job) -> None:
    """The job's stop notices as a control plane before migration 0032 stored them: every stop
    but a cancel and a runtime limit a `job.preempting`, with the same reason, words and data."""
    assert Event.objects.filter(job=job, kind=EventKind.JOB_STOPPING).update(kind=EventKind.JOB_PREEMPTING)


def events_of(job: Job) -> list[dict[str, Any]]:
    return list(job.events.order_by("created_at", "id").values("created_at", "kind", "reason", "message", "data"))


def _running(submit_as: Any, **fields: Any) -> tuple[Job, Allocation]:
    job = submit_as("alice", name=fields.pop("name", "train"), gpu_types=("H100-80GB",), **fields)
    run_cycle("test")
    return job, Allocation.objects.get(job=job, state=AllocationState.ACTIVE)


def _status(client_for: Any, job: Job) -> str:
    return client_for("alice").get(f"/jobs/{job.pk}/").content.decode()


def _heading(html: str, notice_id: str) -> str:
    part = html.split(f'id="{notice_id}"', 1)[1]
    return part.split("<h3>", 1)[1].split("</h3>", 1)[0]


@OLD
def test_a_resize_reads_as_a_resize_while_it_stops_and_after(client_for, submit_as, old: bool) -> None:
    job, allocation = _running(submit_as, gpus=8)
    now = timezone.now()
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_RESIZED,
                                   grace_period_s=60, at=now, actor="scheduler@epoch:1", message=RESIZE)
    if old:
        as_before_0032(job)

    html = _status(client_for, job)
    assert _heading(html, "stop-notice") == "Stopping to resize" and RESIZE in html
    assert "Being preempted" not in html and 'id="preemption-notice"' not in html
    labels = [s["label"] for s in state_segments(events_of(job), current_state=JobState.PREEMPTING)]
    assert labels[-1] == "stopping: resize"

    transitions.complete_release(allocation.pk, exit_code=None, at=now + timedelta(seconds=20), actor="agent")
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    html = _status(client_for, job)
    assert _heading(html, "preemption-notice").startswith("Stopped to resize")  # its notice found, either kind
    notice = last_preemption(events_of(job))
    assert notice is not None and notice["signal"]["message"].startswith(RESIZE) and not notice["asked"]
    assert lost_work_since(now - timedelta(minutes=1))["preemptions"] == 0
    assert lost_work_since(now - timedelta(minutes=1))["resizes"] == 1


@OLD
def test_a_requeue_asked_for_reads_as_one_while_it_stops_and_after(client_for, submit_as, old: bool) -> None:
    job, allocation = _running(submit_as, gpus=8)
    alice = get_user_model().objects.get(username="alice")
    requeue.requeue(alice, job.pk, reason="node throws XID 79")
    if old:
        as_before_0032(job)

    html = _status(client_for, job)
    assert _heading(html, "stop-notice") == "Being requeued" and "Requeued by alice: node throws XID 79" in html
    assert "Being preempted" not in html
    labels = [s["label"] for s in state_segments(events_of(job), current_state=JobState.PREEMPTING)]
    assert labels[-1] == "stopping: requeue"

    transitions.complete_release(allocation.pk, exit_code=None, at=timezone.now(), actor="agent")
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.requeue_count == 1 and job.preemption_count == 0
    html = _status(client_for, job)
    assert _heading(html, "preemption-notice") == "Requeued on request"
    notice = last_preemption(events_of(job))
    assert notice is not None and notice["asked"] and notice["signal"]["reason"] == transitions.RELEASE_REQUEUED
    assert lost_work_since(timezone.now() - timedelta(minutes=5))["preemptions"] == 0


@OLD
def test_a_gang_members_exit_is_said_as_such_never_as_a_preemption(client_for, submit_as, old: bool) -> None:
    job, allocation = _running(submit_as, name="pretrain", gpus=16, gpus_per_node=8)
    nodes = list(Node.objects.filter(
        pk__in=AllocationGpu.objects.filter(allocation=allocation).values("node_id")).order_by("name"))
    now = timezone.now()
    agent_protocol._member_gone(allocation.pk, allocation.generation, nodes[0], exit_code=0, at=now,
                                actor=f"agent:{nodes[0].name}")
    if old:
        as_before_0032(job)

    html = _status(client_for, job)
    assert _heading(html, "stop-notice") == "Stopping: a gang member exited"
    assert "Being preempted" not in html and 'id="preemption-notice"' not in html
    labels = [s["label"] for s in state_segments(events_of(job), current_state=JobState.PREEMPTING)]
    assert labels[-1] == "stopping: gang member exited"

    agent_protocol._member_gone(allocation.pk, allocation.generation, nodes[1], exit_code=0,
                                at=now + timedelta(seconds=1), actor=f"agent:{nodes[1].name}")
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    assert last_preemption(events_of(job)) is None
    assert 'id="preemption-notice"' not in _status(client_for, job)


def test_a_real_preemption_still_reads_as_one_and_is_counted(client_for, submit_as) -> None:
    """A preemption's notice was and is a job.preempting."""
    job, allocation = _running(submit_as, gpus=8)
    now = timezone.now()
    why = "Preempted: team language reclaims its H100-80GB quota for job 99. It has 120 s to checkpoint and stop."
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                   grace_period_s=120, at=now, actor="scheduler@epoch:1", message=why)
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_STOPPING).exists()

    html = _status(client_for, job)
    assert _heading(html, "preemption-notice") == "Being preempted" and 'id="stop-notice"' not in html
    labels = [s["label"] for s in state_segments(events_of(job), current_state=JobState.PREEMPTING)]
    assert labels[-1] == "preempting"
    transitions.complete_release(allocation.pk, exit_code=None, at=now + timedelta(seconds=20), actor="agent")
    assert _heading(_status(client_for, job), "preemption-notice").startswith("Preempted")
    assert lost_work_since(now - timedelta(minutes=1))["preemptions"] == 1
