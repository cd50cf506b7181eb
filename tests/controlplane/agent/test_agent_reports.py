"""What agents report, and what it changes: starts, exits, stops, progress, usage samples."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job, Node, UsageSample
from controlplane.services import agent_protocol, reconcile, transitions
from tests.controlplane.loop_fixtures import LoopFleet, agent_client, bind, make_job, register_node


def report(client, name: str, *reports: dict) -> dict:
    response = client.post(f"/api/v1/agent/nodes/{name}/report", {"reports": list(reports)}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def at(seconds: float = 0.0) -> str:
    return (timezone.now() + timedelta(seconds=seconds)).isoformat()


def test_started_on_a_single_node_marks_the_allocation_started(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})

    report(agent_client(token), "gpu-01", {"kind": "started", "generation": allocation.generation, "at": at()})

    allocation.refresh_from_db()
    assert allocation.started_at is not None
    assert Event.objects.filter(kind=EventKind.JOB_STARTED, allocation=allocation, node=node).count() == 1


def test_a_gang_is_started_only_once_every_node_reported(fleet: LoopFleet) -> None:
    a, token_a = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    allocation = bind(make_job(fleet, gpus=16, gpus_per_node=8), {a: range(8), b: range(8)})
    started = {"kind": "started", "generation": allocation.generation, "at": at()}

    report(agent_client(token_a), "gpu-a", started)
    report(agent_client(token_a), "gpu-a", started)  # a repeated report changes nothing
    allocation.refresh_from_db()
    assert allocation.started_at is None

    report(agent_client(token_b), "gpu-b", started)
    allocation.refresh_from_db()
    assert allocation.started_at is not None
    assert Event.objects.filter(kind=EventKind.JOB_STARTED, allocation=allocation).count() == 2


def test_an_exit_with_code_zero_frees_the_gpus_and_the_job_succeeds(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})

    body = report(agent_client(token), "gpu-01",
                  {"kind": "started", "generation": allocation.generation, "at": at(-1)},
                  {"kind": "exited", "generation": allocation.generation, "at": at(), "exit_code": 0})

    assert body["allocations"] == []
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.exit_code == 0
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.RELEASED
    assert not AllocationGpu.objects.filter(allocation=allocation, live=True).exists()


def test_an_exit_with_a_nonzero_code_fails_the_job(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})

    report(agent_client(token), "gpu-01", {"kind": "exited", "generation": allocation.generation, "at": at(),
                                           "exit_code": 3})

    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.exit_code == 3


def test_a_signal_death_is_stored_as_a_shell_reports_it_and_said_with_the_signals_name(fleet: LoopFleet) -> None:
    """The same out-of-memory kill read -9 for a job whose process the agent started (Python's
    returncode) and 137 for one run by a shell: the agent's -N is now stored as 128 + N, and the
    job's events name the signal."""
    node, token = register_node("gpu-01")
    killed, shelled = make_job(fleet), make_job(fleet)
    first, second = bind(killed, {node: [0]}), bind(shelled, {node: [1]})

    report(agent_client(token), "gpu-01",
           {"kind": "exited", "generation": first.generation, "at": at(), "exit_code": -9},
           {"kind": "exited", "generation": second.generation, "at": at(), "exit_code": 137})

    for job in (killed, shelled):
        job.refresh_from_db()
        assert (job.state, job.exit_code) == (JobState.FAILED, 137)
        finished = Event.objects.get(job=job, kind=EventKind.JOB_FINISHED)
        assert finished.message.endswith("with exit code 137 (SIGKILL)"), finished.message


def test_a_repeated_exit_report_changes_nothing(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})
    exited = {"kind": "exited", "generation": allocation.generation, "at": at(), "exit_code": 0}

    report(agent_client(token), "gpu-01", exited)
    report(agent_client(token), "gpu-01", exited)

    assert Event.objects.filter(kind=EventKind.ALLOCATION_RELEASED, allocation=allocation).count() == 1


def test_a_confirmed_stop_of_a_preempted_job_requeues_it_with_its_lost_work(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0, 1]}, at=timezone.now() - timedelta(minutes=10))
    transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                            grace_period_s=5, at=timezone.now(), actor="test", message="make room")

    report(agent_client(token), "gpu-01", {"kind": "exited", "generation": allocation.generation, "at": at(),
                                           "exit_code": -15})

    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.preemption_count == 1
    assert job.lost_gpu_seconds > 2 * 9 * 60  # two GPUs, ten minutes since start, no checkpoint


def test_a_gang_member_that_fails_stops_the_rest_and_frees_only_its_own_gpus_first(fleet: LoopFleet) -> None:
    a, token_a = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    job = make_job(fleet, gpus=16, gpus_per_node=8)
    allocation = bind(job, {a: range(8), b: range(8)})

    report(agent_client(token_a), "gpu-a", {"kind": "exited", "generation": allocation.generation, "at": at(),
                                            "exit_code": 1})

    allocation.refresh_from_db()
    assert allocation.state == AllocationState.RELEASING and allocation.release_reason == "GangMemberFailed"
    assert not AllocationGpu.objects.filter(allocation=allocation, node=a, live=True).exists()
    assert AllocationGpu.objects.filter(allocation=allocation, node=b, live=True).count() == 8
    (on_b,) = agent_client(token_b).post("/api/v1/agent/nodes/gpu-b/heartbeat", {}, format="json").json()["allocations"]
    assert on_b["state"] == "releasing" and on_b["release"]["reason"] == "GangMemberFailed"

    report(agent_client(token_b), "gpu-b", {"kind": "exited", "generation": allocation.generation, "at": at(),
                                            "exit_code": -15})

    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.exit_code == 1  # the member that ended the gang decides
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.RELEASED


def test_a_fenced_gang_loses_only_the_work_of_the_gpus_it_still_held(fleet: LoopFleet) -> None:
    """Found by reading (accounting QA): a requeue counted every GPU the allocation ever held, so
    a gang whose member on b had already exited, fenced when a's node went silent, was charged
    b's GPUs as lost work too (more than showback's preemption GPU-hours for it). Since 5 Dec
    such a gang is not requeued at all: b's member ended it with exit code 0, and the fence of
    the rest ends the job as that exit says, losing no work
    (tests/controlplane/loop/test_gang_member_exit_then_fence.py)."""
    a, _ = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    job = make_job(fleet, gpus=4, gpus_per_node=2)
    allocation = bind(job, {a: [0, 1], b: [0, 1]}, at=timezone.now() - timedelta(minutes=10))
    report(agent_client(token_b), "gpu-b", {"kind": "exited", "generation": allocation.generation, "at": at(),
                                            "exit_code": 0})
    assert AllocationGpu.objects.filter(allocation=allocation, live=True).count() == 2
    Node.objects.filter(pk=a.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))

    reconcile.expire_node(a.pk, now=timezone.now())

    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.exit_code == 0
    assert job.lost_gpu_seconds == 0 and job.requeue_count == 0


def test_fencing_a_gang_after_its_member_left_a_node_leaves_the_new_owner_there_alone(fleet: LoopFleet) -> None:
    """Found by the chaos drill (CI, stop 22): a gang's member on b exited, a new job took b's
    GPUs, then a went silent and the gang was fenced to a newer generation than the new job's.
    The new owner on b keeps running and b is not quarantined; b's stale reports about the
    gang's old generation are refused; the fence names only the node it took GPUs from."""
    a, _ = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    gang = make_job(fleet, gpus=4, gpus_per_node=2, name="gang")
    old = bind(gang, {a: [0, 1], b: [0, 1]}, at=timezone.now() - timedelta(minutes=10))
    gang_generation = old.generation
    client_b = agent_client(token_b)
    report(client_b, "gpu-b", {"kind": "exited", "generation": old.generation, "at": at(), "exit_code": 0})
    newcomer = bind(make_job(fleet, gpus=2, name="newcomer"), {b: [0, 1]})
    assert newcomer.generation > old.generation
    Node.objects.filter(pk=a.pk).update(agent_lease_expires_at=timezone.now() - timedelta(seconds=1))

    reconcile.expire_node(a.pk, now=timezone.now())

    old.refresh_from_db()
    assert old.state == AllocationState.FENCED and old.generation > newcomer.generation
    fenced = Event.objects.get(kind=EventKind.ALLOCATION_FENCED, allocation=old)
    assert fenced.data["nodes"] == ["gpu-a"] and "gpu-b" not in fenced.message
    body = report(client_b, "gpu-b", {"kind": "progress", "generation": gang_generation, "at": at(), "steps": 7},
                  {"kind": "progress", "generation": newcomer.generation, "at": at(), "steps": 5})
    assert gang_generation in body["stale_reports"]
    assert newcomer.generation not in body["stale_reports"] and newcomer.generation not in body["stop"]
    beat = client_b.post("/api/v1/agent/nodes/gpu-b/heartbeat", {"running": [newcomer.generation]},
                         format="json").json()
    assert [x["generation"] for x in beat["allocations"]] == [newcomer.generation] and beat["stop"] == []
    b.refresh_from_db()
    newcomer.refresh_from_db()
    assert newcomer.state == AllocationState.ACTIVE and b.state != "quarantined"
    assert Job.objects.get(pk=newcomer.job_id).steps == 5


def test_a_gang_whose_members_all_exit_zero_succeeds(fleet: LoopFleet) -> None:
    a, token_a = register_node("gpu-a")
    b, token_b = register_node("gpu-b")
    job = make_job(fleet, gpus=2, gpus_per_node=1)
    allocation = bind(job, {a: [0], b: [0]})
    exited = {"kind": "exited", "generation": allocation.generation, "at": at(), "exit_code": 0}

    report(agent_client(token_a), "gpu-a", exited)
    report(agent_client(token_b), "gpu-b", exited)

    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED


def test_work_lost_on_a_node_requeues_the_job_instead_of_failing_it(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})

    report(agent_client(token), "gpu-01", {"kind": "lost", "generation": allocation.generation, "at": at(),
                                           "exit_code": -9, "message": "stopped: lease"})

    job.refresh_from_db()
    assert job.state == JobState.PENDING
    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.FENCED


def test_fencing_reports_about_a_fenced_generation_change_nothing_and_the_reply_says_stop(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})
    old = allocation.generation
    from controlplane.services import reconcile

    with __import__("django.db").db.transaction.atomic():
        transitions.fence_allocation(allocation.pk, lease=reconcile.lock_scheduler_lease(), at=timezone.now(),
                                     actor="test", reason="test")

    body = report(agent_client(token), "gpu-01",
                  {"kind": "progress", "generation": old, "at": at(), "steps": 500},
                  {"kind": "exited", "generation": old, "at": at(), "exit_code": 0})

    assert old in body["stop"] and old in body["stale_reports"]
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.steps == 0


def test_progress_only_moves_forward(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})
    client = agent_client(token)
    checkpoint = timezone.now() - timedelta(seconds=30)

    report(client, "gpu-01", {"kind": "progress", "generation": allocation.generation, "at": at(), "steps": 100,
                              "useful_tokens": 4000, "last_checkpoint_at": checkpoint.isoformat()})
    report(client, "gpu-01", {"kind": "progress", "generation": allocation.generation, "at": at(), "steps": 40,
                              "useful_tokens": 10, "last_checkpoint_at": (checkpoint - timedelta(hours=1)).isoformat()})

    job.refresh_from_db()
    assert (job.steps, job.useful_tokens) == (100, 4000)
    assert abs((job.last_checkpoint_at - checkpoint).total_seconds()) < 0.01


def test_samples_become_usage_rows_with_the_nodes_gpu_count(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet, gpus=2)
    # (bound before the sample's start: a report's instants are taken no earlier than the bind)
    allocation = bind(job, {node: [0, 1]}, at=timezone.now() - timedelta(seconds=60))

    report(agent_client(token), "gpu-01", {"kind": "sample", "generation": allocation.generation,
                                           "started_at": at(-10), "at": at(), "gpu_activity": 0.75, "steps": 10,
                                           "useful_tokens": 40960})

    sample = UsageSample.objects.get(allocation=allocation)
    assert sample.gpus == 2 and sample.gpu_activity == 0.75 and sample.steps == 10 and sample.job_id == job.pk
    assert 9.5 < (sample.ended_at - sample.started_at).total_seconds() < 10.5


def test_a_sample_reaching_past_a_release_is_cut_at_the_release(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]}, at=timezone.now() - timedelta(seconds=60))
    released = timezone.now() - timedelta(seconds=5)
    agent_protocol.apply_reports(node, [agent_protocol.Report("exited", allocation.generation, released, exit_code=0)],
                                 now=timezone.now())

    report(agent_client(token), "gpu-01", {"kind": "sample", "generation": allocation.generation,
                                           "started_at": at(-10), "at": at(), "gpu_activity": 1.0})

    sample = UsageSample.objects.get(allocation=allocation)
    assert abs((sample.ended_at - released).total_seconds()) < 0.01


def test_times_from_an_agent_clock_running_ahead_are_taken_as_now(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})

    report(agent_client(token), "gpu-01", {"kind": "started", "generation": allocation.generation, "at": at(3600)})

    allocation.refresh_from_db()
    assert allocation.started_at <= timezone.now()


def test_a_releasing_allocation_the_agent_never_started_is_confirmed_stopped(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    job = make_job(fleet)
    allocation = bind(job, {node: [0]})
    transitions.cancel_job(job, "user:alice")

    report(agent_client(token), "gpu-01", {"kind": "exited", "generation": allocation.generation, "at": at(),
                                           "exit_code": None, "message": "never started on this node"})

    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert Job.objects.get(pk=job.pk).finished_at is not None


def test_a_resent_sample_is_stored_once(fleet: LoopFleet) -> None:
    node, token = register_node("gpu-01")
    allocation = bind(make_job(fleet), {node: [0]})
    sample = {"kind": "sample", "generation": allocation.generation, "started_at": at(-10), "at": at(),
              "gpu_activity": 0.5, "steps": 7}

    report(agent_client(token), "gpu-01", sample)
    report(agent_client(token), "gpu-01", sample)

    assert UsageSample.objects.filter(allocation=allocation).count() == 1
