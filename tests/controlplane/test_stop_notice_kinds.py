"""A stop that is no preemption is not recorded as one. The control loop's stop notice was a
`job.preempting` for every stop but a cancel and a runtime limit: an elastic job's resize, a
requeue someone asked for (`qm requeue`, the API, the page) and the rest of a gang stopped because
one member exited or failed all read as preemptions to the events API (`?kind=job.preempting`), a
webhook consumer or a count. They are `job.stopping` now (migration 0032), with the same reason
and data; a preemption (a reclaim too) stays `job.preempting`.

Databases of earlier versions hold those stops as `job.preempting` with their reason: every
reader of a stop notice gives the same answer for such an old event as for the new one."""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.api.views import stop_notice
from controlplane.choices import AllocationState, EventKind, JobHold, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node
from controlplane.services import agent_protocol, job_costs, job_runs, notifications, transitions
from controlplane.services.agent_protocol import RELEASE_GANG_MEMBER_EXITED, RELEASE_GANG_MEMBER_FAILED
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, client_for

pytestmark = pytest.mark.django_db

_generations = itertools.count(700)

#: Every stop that is no preemption, no cancel and no runtime limit.
OTHER_STOPS = (transitions.RELEASE_RESIZED, transitions.RELEASE_REQUEUED, transitions.RELEASE_REQUEUED_HELD,
               RELEASE_GANG_MEMBER_EXITED, RELEASE_GANG_MEMBER_FAILED)


def _running(fleet: Fleet, nodes: int = 1, name: str = "train", first: int = 0) -> Allocation:
    """A job running on 8 GPUs of each of `nodes` H100 nodes (from the `first`), for an hour."""
    started = timezone.now() - timedelta(hours=1)
    job = f.make_job(fleet.ml, name=name, gpus=8 * nodes, gpus_per_node=8 if nodes > 1 else None,
                     state=JobState.RUNNING, started_at=started)
    allocation = Allocation.objects.create(job=job, generation=next(_generations), epoch=1, created_at=started,
                                           started_at=started, state=AllocationState.ACTIVE)
    for node in fleet.nodes[first:first + nodes]:
        AllocationGpu.objects.bulk_create(
            AllocationGpu(allocation=allocation, node=node, gpu_index=i, live=True) for i in range(8))
    return allocation


def _stop(allocation: Allocation, reason: str, *, data: dict[str, Any] | None = None) -> Event:
    at = timezone.now()
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=reason, grace_period_s=45, at=at,
                                   actor="scheduler@epoch:1", message=f"Stopped: {reason}", epoch=1,
                                   lost_gpu_hours=1.25, data=data)
    return Event.objects.filter(allocation=allocation).exclude(kind=EventKind.JOB_BOUND).latest("id")


def as_before_0032(notice: Event) -> Event:
    """The same notice as a control plane before migration 0032 wrote it: every stop but a cancel
    and a runtime limit under `job.preempting`, its reason, message and data as they are now."""
    Event.objects.filter(pk=notice.pk).update(kind=EventKind.JOB_PREEMPTING)
    notice.refresh_from_db()
    return notice


@pytest.mark.parametrize("reason", OTHER_STOPS)
def test_a_stop_that_is_no_preemption_is_noticed_as_job_stopping_with_its_reason_and_data(
        fleet: Fleet, reason: str) -> None:
    allocation = _running(fleet)

    notice = _stop(allocation, reason)

    assert (notice.kind, notice.reason, notice.actor, notice.epoch) == (EventKind.JOB_STOPPING, reason,
                                                                       "scheduler@epoch:1", 1)
    assert notice.job_id == allocation.job_id and notice.node == fleet.nodes[0]
    assert notice.data["generation"] == allocation.generation and notice.data["grace_period_s"] == 45
    assert notice.data["nodes"] == [fleet.nodes[0].name] and notice.data["expected_lost_gpu_hours"] == 1.25
    assert notice.data["deadline"] == (notice.created_at + timedelta(seconds=45)).isoformat()
    assert not Event.objects.filter(job_id=allocation.job_id, kind=EventKind.JOB_PREEMPTING).exists()


def test_a_preemption_stays_job_preempting_a_cancel_and_a_runtime_limit_keep_their_kinds(fleet: Fleet) -> None:
    kinds = {reason: _stop(_running(fleet, first=i), reason).kind
             for i, reason in enumerate((transitions.RELEASE_PREEMPTED, transitions.RELEASE_CANCELLED,
                                         transitions.RELEASE_RUNTIME_LIMIT))}

    assert kinds == {transitions.RELEASE_PREEMPTED: EventKind.JOB_PREEMPTING,
                     transitions.RELEASE_CANCELLED: EventKind.JOB_CANCELLED,
                     transitions.RELEASE_RUNTIME_LIMIT: EventKind.JOB_TIMED_OUT}


@pytest.mark.parametrize("exit_code, reason", [(0, RELEASE_GANG_MEMBER_EXITED), (3, RELEASE_GANG_MEMBER_FAILED)])
def test_a_gang_members_exit_stops_the_rest_under_a_job_stopping_notice(fleet: Fleet, exit_code: int,
                                                                        reason: str) -> None:
    allocation = _running(fleet, nodes=2)
    first: Node = fleet.nodes[0]

    agent_protocol._member_gone(allocation.pk, allocation.generation, first, exit_code=exit_code,
                                at=timezone.now(), actor=f"agent:{first.name}")

    allocation.refresh_from_db()
    assert allocation.state == AllocationState.RELEASING and allocation.release_reason == reason
    [notice] = Event.objects.filter(job_id=allocation.job_id, kind__in=transitions.STOP_NOTICE_KINDS)
    assert (notice.kind, notice.reason) == (EventKind.JOB_STOPPING, reason)
    assert notifications.notify_on(notice) is None  # no webhook says "preempted"


def test_the_api_lists_job_stopping_apart_from_job_preempting(fleet: Fleet) -> None:
    preempted = _stop(_running(fleet, name="victim"), transitions.RELEASE_PREEMPTED)
    resized = _stop(_running(fleet, name="elastic", first=1), transitions.RELEASE_RESIZED)
    api = client_for(fleet, "admin")

    def ids(kind: str) -> list[int]:
        r = api.get("/api/v1/events/", {"kind": kind})
        assert r.status_code == 200, r.content[:300]
        return [e["id"] for e in r.json()["results"]]

    assert ids("job.preempting") == [preempted.pk]
    assert ids("job.stopping") == [resized.pk]


@pytest.mark.parametrize("old", [False, True], ids=["job.stopping", "job.preempting before 0032"])
def test_a_requeue_asked_for_is_read_from_its_notice_of_either_kind(fleet: Fleet, old: bool) -> None:
    allocation = _running(fleet)
    carol = f.make_user("carol", team=fleet.ml)
    notice = _stop(allocation, transitions.RELEASE_REQUEUED_HELD,
                   data={"requested_by": "carol", "requested_by_id": carol.pk, "reason": "XID 79", "hold": "admin"})
    if old:
        as_before_0032(notice)
    allocation.refresh_from_db()

    asked = transitions.requeue_request(allocation)

    assert (asked.by, asked.by_id, asked.reason, asked.hold) == ("carol", carol.pk, "XID 79", JobHold.ADMIN)


@pytest.mark.parametrize("old", [False, True], ids=["job.stopping", "job.preempting before 0032"])
@pytest.mark.parametrize("reason", OTHER_STOPS)
def test_qm_explain_and_the_runs_read_a_stop_notice_of_either_kind_alike(fleet: Fleet, reason: str,
                                                                         old: bool) -> None:
    allocation = _running(fleet)
    notice = _stop(allocation, reason)
    if old:
        as_before_0032(notice)
    job = Job.objects.get(pk=allocation.job_id)

    kind, text = stop_notice(job)

    assert kind == EventKind.JOB_STOPPING  # an old notice of such a stop reads as the new kind
    assert f"Stopped: {reason}" in text and "Its processes must exit by" in text
    now = timezone.now()
    [run] = job_runs.describe(job, list(job_runs.runs_of(job)), first=1, now=now,
                              costs=job_costs.run_costs(job.pk, now))
    assert run.notice.startswith(f"Stopped: {reason}") and run.outcome == "stopping"
    assert notifications.notify_on(notice) is None


@pytest.mark.parametrize("old", [False, True], ids=["as recorded", "the same, recorded as before 0032"])
def test_only_a_real_preemption_notifies_preempted_and_reads_as_job_preempting(fleet: Fleet, old: bool) -> None:
    allocation = _running(fleet)
    notice = _stop(allocation, transitions.RELEASE_PREEMPTED)
    if old:
        as_before_0032(notice)  # a preemption was job.preempting already: nothing to read otherwise

    assert notifications.notify_on(notice) == "preempted"
    assert stop_notice(Job.objects.get(pk=allocation.job_id))[0] == EventKind.JOB_PREEMPTING


def test_notice_kind_reads_an_old_notice_by_its_reason() -> None:
    assert transitions.notice_kind(EventKind.JOB_PREEMPTING, transitions.RELEASE_PREEMPTED) == "job.preempting"
    assert transitions.notice_kind(EventKind.JOB_PREEMPTING, "") == "job.preempting"  # no reason: as recorded
    for reason in OTHER_STOPS:
        assert transitions.notice_kind(EventKind.JOB_PREEMPTING, reason) == "job.stopping"
        assert transitions.notice_kind(EventKind.JOB_STOPPING, reason) == "job.stopping"
    assert transitions.notice_kind(EventKind.JOB_CANCELLED, transitions.RELEASE_CANCELLED) == "job.cancelled"
