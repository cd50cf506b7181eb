"""A restarted agent takes over the work bound for its node that never started there.

Found by an operator audit of the demo: the simulated agents' process was killed (-9) and
started again at once. Until the nodes' new agents had registered, one after another over
about a second, the nodes read ready with their old leases, and the loop bound the jobs that
the first registrations had fenced (they had run under the old process) onto nodes whose new
agent had not registered yet. Each of those registrations then fenced the job again as
"abandoned" by its agent (`AgentRestarted`), though no agent had ever started it: job 50 was
fenced twice within one second, requeued twice and counted two requeues.

A fresh registration says "nothing runs here but `running`", so an allocation that no agent of
the node ever reported started has no process there to fence: the fresh agent starts it under
the same generation (nothing else was placed on its GPUs meanwhile). Work an agent of the node
did start is still fenced and its job requeued whole, as before.

Since 8 Dec only when the registration vouches for what was launched on the node: it names the
runs its launch journal holds (`launched`, here none), and it is the node's own agent as its
predecessor was (the node's token, or a simulated node, as the demo's). A run the agent names
launched, or one bound for an agent that cannot vouch, is fenced as started work is
(test_agent_takeover_never_runs_a_launch_twice.py, and the last tests here).
"""

from __future__ import annotations

from typing import Any

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, Event, Job
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, agent_client, bind, make_job

REGISTER = "/api/v1/agent/register"


def heartbeat(token: str, name: str, **body: Any) -> dict[str, Any]:
    response = agent_client(token).post(f"/api/v1/agent/nodes/{name}/heartbeat", body, format="json")
    assert response.status_code == 200, response.content
    return dict(response.json())


def register(name: str, token: str = BOOTSTRAP, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96,
                            "memory_gb": 1024, "leaf_switch": "leaf-1", "spine": "spine-1", "running": []}
    body.update(extra)
    response = agent_client(token).post(REGISTER, body, format="json")
    assert response.status_code in (200, 201), response.content
    return dict(response.json())


def started(token: str, name: str, generation: int) -> None:
    from django.utils import timezone

    heartbeat(token, name, running=[generation],
              reports=[{"kind": "started", "generation": generation, "at": timezone.now().isoformat()}])


def test_sre_job_bound_onto_a_restarting_node_is_not_fenced_again_when_its_agent_registers(fleet: LoopFleet) -> None:
    from controlplane.models import Node

    # The demo's simulated nodes: their runs die with their agents' process.
    first_token = register("gpu-01", simulated=True)["token"]
    second_token = register("gpu-02", simulated=True)["token"]
    gpu_01, gpu_02 = Node.objects.get(name="gpu-01"), Node.objects.get(name="gpu-02")
    job = make_job(fleet, name="restart-victim")
    ran = bind(job, {gpu_01: [0]})
    started(first_token, "gpu-01", ran.generation)
    heartbeat(second_token, "gpu-02", running=[])

    # The agents' process dies (no goodbye) and starts again: gpu-01's new agent registers
    # first, and fences the run its predecessor had started.
    register("gpu-01", simulated=True, launched=[])
    assert Allocation.objects.get(pk=ran.pk).state == AllocationState.FENCED
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    # The loop binds the requeued job onto gpu-02, still ready on its old agent's lease.
    again = bind(Job.objects.get(pk=job.pk), {gpu_02: [3]})

    fresh = register("gpu-02", simulated=True, launched=[])

    kept = Allocation.objects.get(pk=again.pk)
    assert kept.state == AllocationState.ACTIVE and kept.generation == again.generation
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert job.requeue_count == 1  # the one real loss, on gpu-01
    assert Event.objects.filter(kind=EventKind.ALLOCATION_FENCED, job=job).count() == 1
    registered = Event.objects.filter(kind=EventKind.NODE_REGISTERED, node=gpu_02).latest("id")
    assert f"generation {again.generation}" in registered.message
    assert registered.data["taken_over_generations"] == [again.generation]
    # The fresh agent is given it to start, on the GPU it was bound to.
    (desired,) = heartbeat(fresh["token"], "gpu-02", running=[])["allocations"]
    assert desired["generation"] == again.generation and desired["gpus"] == [3]


def test_sre_work_its_agent_started_is_still_fenced_when_a_fresh_agent_registers(fleet: LoopFleet) -> None:
    from controlplane.models import Node

    token = register("gpu-01")["token"]
    node = Node.objects.get(name="gpu-01")
    ran = bind(make_job(fleet, name="ran"), {node: [0]})
    never = bind(make_job(fleet, name="never-started"), {node: [1]})
    started(token, "gpu-01", ran.generation)

    fresh = register("gpu-01", token, launched=[])  # restarted with its state directory

    assert Allocation.objects.get(pk=ran.pk).state == AllocationState.FENCED
    assert Job.objects.get(pk=ran.job_id).state == JobState.PENDING
    assert Allocation.objects.get(pk=never.pk).state == AllocationState.ACTIVE
    assert fresh["settled_generations"] == [ran.generation]
    given = heartbeat(fresh["token"], "gpu-01", running=[])["allocations"]
    assert [a["generation"] for a in given] == [never.generation]


def test_sre_gang_member_not_started_on_the_restarted_node_is_taken_over_while_started_elsewhere(
    fleet: LoopFleet,
) -> None:
    from controlplane.models import Node

    token_a = register("gpu-a")["token"]
    token_b = register("gpu-b")["token"]
    gpu_a, gpu_b = Node.objects.get(name="gpu-a"), Node.objects.get(name="gpu-b")
    gang = bind(make_job(fleet, name="gang", gpus=2), {gpu_a: [0], gpu_b: [0]})
    started(token_a, "gpu-a", gang.generation)

    register("gpu-b", token_b, launched=[])  # gpu-b's agent restarted before it had started its member

    assert Allocation.objects.get(pk=gang.pk).state == AllocationState.ACTIVE

    register("gpu-a", token_a, launched=[])  # gpu-a's had started its own: that one is lost, the gang fenced whole

    assert Allocation.objects.get(pk=gang.pk).state == AllocationState.FENCED


# ---------------------------------------------------------------- when the fresh agent cannot vouch


def _bound_and_never_reported(fleet: LoopFleet, name: str) -> tuple[str, Allocation]:
    token = register(name)["token"]
    from controlplane.models import Node

    return token, bind(make_job(fleet, name="never-reported"), {Node.objects.get(name=name): [2]})


def _requeued_not_taken_over(allocation: Allocation, name: str, why: str) -> None:
    from controlplane.models import Node

    assert Allocation.objects.get(pk=allocation.pk).state == AllocationState.FENCED
    assert Job.objects.get(pk=allocation.job_id).state == JobState.PENDING
    registered = Event.objects.filter(kind=EventKind.NODE_REGISTERED, node=Node.objects.get(name=name)).latest("id")
    assert "taken_over_generations" not in registered.data
    assert registered.data["not_taken_over_generations"] == [allocation.generation]
    assert why in registered.message


def test_sre_run_the_fresh_agent_names_launched_is_fenced_not_started_again(fleet: LoopFleet) -> None:
    token, launched = _bound_and_never_reported(fleet, "gpu-01")

    fresh = register("gpu-01", token, launched=[launched.generation])

    _requeued_not_taken_over(launched, "gpu-01", "an agent of the node launched it")
    assert fresh["settled_generations"] == [launched.generation]
    assert heartbeat(fresh["token"], "gpu-01", running=[])["allocations"] == []


def test_sre_bootstrap_registration_while_the_old_lease_runs_takes_nothing_over(fleet: LoopFleet) -> None:
    """Another host given the node's name, or one whose state directory (token, launch journal)
    was lost: what the old agent, its lease still running, launched unreported may run there."""
    _, never = _bound_and_never_reported(fleet, "gpu-01")

    register("gpu-01", launched=[])

    _requeued_not_taken_over(never, "gpu-01", "could not vouch")


def test_sre_agent_that_does_not_say_what_was_launched_takes_nothing_over(fleet: LoopFleet) -> None:
    """An agent before 8 Dec keeps no launch journal and sends no `launched`."""
    token, never = _bound_and_never_reported(fleet, "gpu-01")

    register("gpu-01", token)

    _requeued_not_taken_over(never, "gpu-01", "could not vouch")


def test_sre_after_the_old_lease_ran_out_a_bootstrap_registration_takes_over(fleet: LoopFleet) -> None:
    """The old agent, if alive, killed its runs when it could not renew its lease; dead, they
    died with it: the runs never reported started are the fresh agent's to start."""
    from django.utils import timezone

    from controlplane.models import Node

    _, never = _bound_and_never_reported(fleet, "gpu-01")
    Node.objects.filter(name="gpu-01").update(agent_lease_expires_at=timezone.now())  # reconcile not yet run

    fresh = register("gpu-01", launched=[])

    assert Allocation.objects.get(pk=never.pk).state == AllocationState.ACTIVE
    (desired,) = heartbeat(fresh["token"], "gpu-01", running=[])["allocations"]
    assert desired["generation"] == never.generation
