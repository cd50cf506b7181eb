"""A simulated node agent against the real API (live server, PostgreSQL), with the real cycle."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from django.utils import timezone

from controlplane.agent.client import AgentClient
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory
from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Job, Node, UsageSample
from controlplane.services import cycle, reconcile, transitions
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job

pytestmark = pytest.mark.django_db(transaction=True)


def sim_agent(server: str, name: str = "sim-000", **kw: Any) -> NodeAgent:
    inventory = NodeInventory(name=name, gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64, memory_gb=512,
                              leaf_switch="leaf-1", spine="spine-1", simulated=True)
    options: dict[str, Any] = {"interval_s": 0.2, "sample_interval_s": 0.3}
    options.update(kw)
    return NodeAgent(inventory, client=AgentClient(server), launcher=SimulatedLauncher(), bootstrap_token=BOOTSTRAP,
                     **options)


def drive(agents: list[NodeAgent], until: Callable[[], bool], timeout: float = 60.0, also: Callable[[], object] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for agent in agents:
            agent.step()
        if also is not None:
            also()
        if until():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def test_a_simulated_node_runs_a_scheduled_job_to_success_and_accounts_for_it(live_server: Any) -> None:
    fleet = build_loop_fleet()
    agent = sim_agent(live_server.url)
    drive([agent], lambda: Node.objects.filter(name="sim-000", state=NodeState.READY).exists())
    job = make_job(fleet, gpus=2, env={"QM_SIM_DURATION_S": "1.0", "QM_SIM_STEPS_PER_S": "50",
                                       "QM_SIM_TOKENS_PER_STEP": "1000", "QM_SIM_ACTIVITY": "0.8"})

    assert cycle.run_cycle("test").binds == 1
    drive([agent], lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED)

    job.refresh_from_db()
    allocation = Allocation.objects.get(job=job)
    assert allocation.state == AllocationState.RELEASED and allocation.started_at is not None
    assert 40 <= job.steps <= 60 and job.useful_tokens == job.steps * 1000
    samples = UsageSample.objects.filter(allocation=allocation)
    assert samples.exists() and all(s.gpus == 2 and s.gpu_activity == 0.8 for s in samples)
    assert sum(s.steps for s in samples) == job.steps
    kinds = list(Event.objects.filter(job=job).order_by("created_at", "id").values_list("kind", flat=True))
    assert kinds.index(EventKind.JOB_BOUND) < kinds.index(EventKind.JOB_STARTED) < kinds.index(EventKind.JOB_FINISHED)


def test_cancelling_a_running_job_stops_its_process_and_the_job_ends_cancelled(live_server: Any) -> None:
    fleet = build_loop_fleet()
    agent = sim_agent(live_server.url)
    drive([agent], lambda: Node.objects.filter(name="sim-000", state=NodeState.READY).exists())
    job = make_job(fleet)  # runs until stopped
    cycle.run_cycle("test")
    drive([agent], lambda: bool(agent.members))

    transitions.cancel_job(Job.objects.get(pk=job.pk), "user:alice")
    drive([agent], lambda: Job.objects.get(pk=job.pk).state == JobState.CANCELLED)

    assert not agent.members


def test_partition_a_node_that_stops_heartbeating_goes_suspect_then_quarantined_and_its_job_runs_elsewhere(
    live_server: Any, settings: Any
) -> None:
    settings.QM = {**settings.QM, "AGENT_LEASE_S": 2.0, "SUSPECT_AFTER_S": 0.8}
    fleet = build_loop_fleet()
    first, second = sim_agent(live_server.url, "sim-000"), sim_agent(live_server.url, "sim-001")
    drive([first, second], lambda: Node.objects.filter(state=NodeState.READY).count() == 2)
    job = make_job(fleet, gpus=8)
    cycle.run_cycle("test")
    holder = first if Allocation.objects.filter(job=job, gpus__node__name="sim-000").exists() else second
    other = second if holder is first else first
    drive([holder], lambda: bool(holder.members))

    holder.partitioned = True
    states: list[str] = []

    def watch() -> None:
        reconcile.reconcile_nodes()
        states.append(Node.objects.get(name=holder.name).state)
        cycle.run_cycle("test")

    drive([holder, other], lambda: bool(other.members), also=watch)

    assert NodeState.SUSPECT in states and states[-1] == NodeState.QUARANTINED
    assert holder.counters["self_fenced"] == 1 and not holder.members
    fenced = Event.objects.get(kind=EventKind.ALLOCATION_FENCED, job=job)
    # The agent killed its work before the control plane fenced it and reused the GPUs.
    assert holder.self_fenced_at is not None and holder.self_fenced_at < fenced.created_at.timestamp()
    assert Allocation.objects.filter(job=job, state=AllocationState.ACTIVE).get().gpus.first().node.name == other.name

    holder.partitioned = False
    drive([holder, other], lambda: Node.objects.get(name=holder.name).state == NodeState.READY)
    assert Event.objects.filter(node__name=holder.name, reason="RegisteredClean").exists()


def test_partition_a_returning_agent_that_kept_running_learns_its_work_is_stale_and_stops_it(
    live_server: Any, settings: Any
) -> None:
    settings.QM = {**settings.QM, "AGENT_LEASE_S": 1.5, "SUSPECT_AFTER_S": 0.5}
    fleet = build_loop_fleet()
    agent = sim_agent(live_server.url, self_fence=False)
    drive([agent], lambda: Node.objects.filter(state=NodeState.READY).exists())
    job = make_job(fleet)
    cycle.run_cycle("test")
    drive([agent], lambda: bool(agent.members))
    generation = next(iter(agent.members))

    agent.partitioned = True
    deadline = time.monotonic() + 10
    while Node.objects.get(name=agent.name).state != NodeState.QUARANTINED and time.monotonic() < deadline:
        agent.step()
        reconcile.reconcile_nodes()
        time.sleep(0.05)
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    assert generation in agent.members  # the frozen agent's job kept running through the partition

    agent.partitioned = False
    drive([agent], lambda: Node.objects.get(name=agent.name).state == NodeState.READY)

    assert generation not in agent.members
    stale = Event.objects.get(node__name=agent.name, reason="StaleWorkStopped")
    assert stale.data["generations"] == [generation]
    assert stale.created_at <= timezone.now()


def test_a_job_past_its_runtime_limit_is_stopped_and_ends_timed_out(live_server: Any) -> None:
    fleet = build_loop_fleet()
    agent = sim_agent(live_server.url)
    drive([agent], lambda: Node.objects.filter(name="sim-000", state=NodeState.READY).exists())
    job = make_job(fleet, runtime_limit_s=1)  # runs until stopped

    cycle.run_cycle("test")
    drive([agent], lambda: Job.objects.get(pk=job.pk).state == JobState.TIMED_OUT,
          also=lambda: cycle.run_cycle("test"))

    assert not agent.members
    assert Event.objects.filter(job=job, kind=EventKind.JOB_TIMED_OUT).exists()


def test_a_real_process_runs_a_scheduled_job_with_its_gpus_and_its_progress_reaches_the_job(
    live_server: Any, tmp_path: Any
) -> None:
    from controlplane.agent.members import ProcessLauncher

    fleet = build_loop_fleet()
    inventory = NodeInventory(name="gpu-real", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=8, memory_gb=64,
                              leaf_switch="leaf-1", spine="spine-1")
    agent = NodeAgent(inventory, client=AgentClient(live_server.url),
                      launcher=ProcessLauncher(tmp_path, "gpu-real", devices=None), bootstrap_token=BOOTSTRAP,
                      interval_s=0.2, sample_interval_s=0.2)
    drive([agent], lambda: Node.objects.filter(name="gpu-real", state=NodeState.READY).exists())
    command = ('echo "$CUDA_VISIBLE_DEVICES $WORLD_SIZE $RANK" > "$QM_PROGRESS_FILE.env"; '
               'echo \'{"steps": 42, "useful_tokens": 4200, "checkpoint": true}\' >> "$QM_PROGRESS_FILE"; sleep 0.3')
    job = make_job(fleet, gpus=2, command=command)

    cycle.run_cycle("test")
    drive([agent], lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED)

    job.refresh_from_db()
    allocation = Allocation.objects.get(job=job)
    gpus = ",".join(str(g) for g in sorted(allocation.gpus.values_list("gpu_index", flat=True)))
    seen = (tmp_path / "gpu-real" / f"g{allocation.generation}" / "rank0.progress.jsonl.env").read_text().split()
    assert seen == [gpus, "2", "0"]
    assert (job.steps, job.useful_tokens) == (42, 4200) and job.last_checkpoint_at is not None


def test_a_bind_wakes_the_agent_which_starts_the_job_long_before_its_next_heartbeat(live_server: Any) -> None:
    import threading

    from controlplane.agent.node import WakeListener

    fleet = build_loop_fleet()
    agent = sim_agent(live_server.url, interval_s=60.0)  # no heartbeat would come in this test's time
    drive([agent], lambda: Node.objects.filter(name="sim-000", state=NodeState.READY).exists())
    drive([agent], lambda: agent.next_contact > time.monotonic() + 30)  # registered, first pull done
    heartbeat_due = agent.next_contact
    poked = threading.Event()
    stop = threading.Event()
    listener = WakeListener([agent], AgentClient(live_server.url), lambda woken: poked.set(), stop, timeout_s=3.0)
    listener.start()
    try:
        deadline = time.monotonic() + 30
        while listener.since is None and time.monotonic() < deadline:  # holds its long poll now
            time.sleep(0.02)
        assert listener.since is not None
        job = make_job(fleet, gpus=2)
        assert cycle.run_cycle("test").binds == 1
        assert poked.wait(30.0), "the bind's commit did not wake the agent"
        drive([agent], lambda: Allocation.objects.filter(job=job, started_at__isnull=False).exists(), timeout=30.0)
        # started before its next heartbeat was due (a minute after its first pull): by the
        # wake-up (until 6 Dec "within 5 s", which a loaded machine could miss)
        assert time.monotonic() < heartbeat_due
        assert listener.wakes >= 1
    finally:
        stop.set()
        listener.join(timeout=15)


def test_a_wake_up_that_carries_the_desired_state_starts_the_job_without_a_fetch(live_server: Any) -> None:
    import threading

    from controlplane.agent.node import WakeListener

    class CountingClient(AgentClient):
        def __init__(self, server: str) -> None:
            super().__init__(server)
            self.syncs = 0

        def heartbeat(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
            self.syncs += 1 if not body.get("reports") else 0  # a fetch: a contact with nothing to report
            return super().heartbeat(node, token, body)

    fleet = build_loop_fleet()
    client = CountingClient(live_server.url)
    agent = sim_agent(live_server.url, interval_s=60.0)
    agent.client = client
    drive([agent], lambda: Node.objects.filter(name="sim-000", state=NodeState.READY).exists())
    drive([agent], lambda: agent.next_contact > time.monotonic() + 30)  # registered, first pull done
    fetches = client.syncs
    poked = threading.Event()
    stop = threading.Event()
    listener = WakeListener([agent], AgentClient(live_server.url), lambda woken: poked.set(), stop, timeout_s=3.0,
                            desired=True)
    listener.start()
    try:
        deadline = time.monotonic() + 30
        while listener.since is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert listener.since is not None
        job = make_job(fleet, gpus=2, env={"QM_SIM_DURATION_S": "30"})
        assert cycle.run_cycle("test").binds == 1
        assert poked.wait(30.0), "the bind's commit did not wake the agent"
        drive([agent], lambda: Allocation.objects.filter(job=job, started_at__isnull=False).exists(), timeout=30.0)
        allocation = Allocation.objects.get(job=job)
        assert set(agent.members) == {allocation.generation}
        assert agent.counters["prefetched"] >= 1
        assert client.syncs == fetches  # the start report went out; no request fetched the allocation

        # Cancelled: the stop comes with the wake-up too, and the job ends cancelled.
        taken = agent.counters["prefetched"]
        assert transitions.cancel_job(Job.objects.get(pk=job.pk), "test")
        drive([agent], lambda: Job.objects.get(pk=job.pk).state == JobState.CANCELLED, timeout=60.0)
        assert agent.counters["prefetched"] > taken and not agent.members
    finally:
        stop.set()
        listener.join(timeout=15)
