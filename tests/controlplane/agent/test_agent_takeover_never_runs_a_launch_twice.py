"""A fresh agent never starts again a run its predecessor launched and had not yet reported.

A registration that says it runs nothing lets the fresh agent take over what no agent of the
node ever reported started (agent_protocol._never_started_on): bound while its agent was away,
it starts at once under the same generation. Until 8 Dec "never reported started" was read as
"never launched": a run the old agent had launched, whose start report had not gone out when
it died (the report waits up to 0.1 s for company, longer when the control plane is slow or
cut off), was given to the fresh agent and launched a second time under the same generation —
in sequence when the fresh agent's sweep killed the first copy, side by side when the first
copy outlived its agent where the sweep could not find it (a state directory lost with its
records). Both copies wrote the same checkpoints, as one run.

Real job processes (in-process `NodeAgent`s on `ProcessLauncher`s, as test_agent_ships_logs
does, so the old agent can "die" with its run left alive and its start report unsent) and the
real API on PostgreSQL. Each test its own node name, used by no other file: an agent's sweep
kills the processes on the host carrying its node's name.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.client import AgentClient
from controlplane.agent.launch_journal import LAUNCHES_DIR, LaunchJournal
from controlplane.agent.members import ProcessLauncher, marked_processes
from controlplane.agent.node import NodeAgent
from controlplane.choices import AllocationState, EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Job, Node
from tests.controlplane.agent.real_agent import wait_for
from tests.controlplane.agent.test_agent_ships_logs import drive, process_agent
from tests.controlplane.loop_fixtures import bind, build_loop_fleet, make_job


def _ledger(path: Path) -> list[tuple[int, int]]:
    """(generation, pid) of every copy of a job's command that ever started."""
    if not path.exists():
        return []
    return [(int(g), int(p)) for g, p in (line.split() for line in path.read_text().splitlines() if line.strip())]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X")


def _old_agent_dies_after_launching(server: str, state: Path, name: str, ledger: Path) -> tuple[NodeAgent, Job, Job]:
    """An agent of `name` launches one run and is cut off before its start report goes out; it
    then "dies" with the run alive (its reaper and the run's death signal never fire: the run
    outlived it). A second job is bound onto the node meanwhile, never seen by any agent."""
    fleet = build_loop_fleet()
    client = AgentClient(server)
    old = process_agent(server, state, client, name=name)
    old.journal = LaunchJournal(state / name / LAUNCHES_DIR)  # as `qm-agent` keeps it
    drive(old, lambda: Node.objects.filter(name=name, state=NodeState.READY).exists())
    node = Node.objects.get(name=name)
    launched = make_job(fleet, name="launched", command=f'echo "$QM_GENERATION $$" >> {ledger}; exec sleep 600')
    generation = bind(launched, {node: [0]}).generation
    drive(old, lambda: generation in old.members)
    old.partitioned = True  # the start report stays in its outbox
    wait_for(lambda: len(_ledger(ledger)) == 1, 30, "the first copy to run")
    assert [r for r in old.outbox if r["kind"] == "started"], "the start report must still be unsent"
    never = make_job(fleet, name="never-launched", command=f'echo "$QM_GENERATION $$" >> {ledger}; exec sleep 600')
    bind(never, {node: [5]})
    return old, launched, never


def _fresh_agent(server: str, state: Path, name: str, token: str = "") -> NodeAgent:
    """A new agent of `name` as `qm-agent` starts one: its sweep of what a previous agent left,
    then the agent, with the node token its state directory kept (if any)."""
    launcher = ProcessLauncher(state, name, devices=None)
    launcher.sweep_leftovers()
    journal = LaunchJournal(state / name / LAUNCHES_DIR)
    journal.found(launcher.left_behind)
    client = AgentClient(server)
    agent = process_agent(server, state, client, name=name)
    agent.launcher, agent.journal, agent.token = launcher, journal, token
    return agent


def _hang_up(*agents: NodeAgent) -> None:
    """Close the agents' keep-alive connections: the live server's threads serving them hold
    database sessions."""
    for agent in agents:
        session = getattr(agent.client._local, "session", None)  # noqa: SLF001 - the test's own client
        if session is not None:
            session.close()


def _kill_marked(name: str, generations: set[int]) -> None:
    for pid in marked_processes(name, generations):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _settle(agent: NodeAgent, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(min(agent.step(), 0.05))


def _runs_once(fresh: NodeAgent, launched: Job, never: Job, ledger: Path, *, taken_over: bool) -> None:
    """The launched run never runs again under its generation, nothing of its first copy lives
    on, and it is requeued as lost with its agent; the never-launched one is taken over and
    starts promptly under its own generation (`taken_over`), or is requeued too."""
    first = Allocation.objects.get(job=launched)
    waiting = Allocation.objects.get(job=never)
    t0 = time.monotonic()
    drive(fresh, lambda: fresh.registered, timeout=15)
    if taken_over:
        # Started promptly, under its own generation, without a cycle.
        drive(fresh, lambda: waiting.generation in fresh.members, timeout=15)
        assert time.monotonic() - t0 < 5.0
        wait_for(lambda: waiting.generation in {g for g, _ in _ledger(ledger)}, 15, "the never-launched run")
    _settle(fresh, 1.5)
    copies = [g for g, _ in _ledger(ledger)]
    assert copies.count(first.generation) == 1, f"generation {first.generation} started {copies.count(first.generation)} times"
    assert first.generation not in fresh.members
    # Nothing of the first copy lives on.
    assert not [pid for g, pid in _ledger(ledger) if g == first.generation and _alive(pid)]
    # It was lost with its agent: fenced, its job requeued to run again under a new generation.
    assert Allocation.objects.get(pk=first.pk).state == AllocationState.FENCED
    assert Job.objects.get(pk=launched.pk).state == JobState.PENDING
    registered = Event.objects.filter(kind=EventKind.NODE_REGISTERED, node__name=fresh.name).latest("id")
    assert first.generation in registered.data["settled_generations"]
    if taken_over:
        assert copies.count(waiting.generation) == 1
        assert Allocation.objects.get(pk=waiting.pk).state == AllocationState.ACTIVE
        assert registered.data.get("taken_over_generations") == [waiting.generation]
    else:
        assert waiting.generation not in copies and waiting.generation not in fresh.members
        assert Allocation.objects.get(pk=waiting.pk).state == AllocationState.FENCED
        assert Job.objects.get(pk=never.pk).state == JobState.PENDING
        assert "taken_over_generations" not in registered.data


@pytest.mark.django_db(transaction=True)
def test_restarted_agent_with_its_state_directory_never_launches_the_unreported_run_again(
    live_server: Any, state_dir: Path, tmp_path: Path,
) -> None:
    name = "gpu-twice-kept"
    ledger = tmp_path / "ledger"
    old, launched, never = _old_agent_dies_after_launching(live_server.url, state_dir, name, ledger)
    fresh = None
    try:
        # `qm-agent` started again on the node (systemd), with the state directory and its token.
        fresh = _fresh_agent(live_server.url, state_dir, name, token=old.token)
        _runs_once(fresh, launched, never, ledger, taken_over=True)
    finally:
        _kill_marked(name, {g for g, _ in _ledger(ledger)})
        _hang_up(old, *([fresh] if fresh is not None else []))


@pytest.mark.django_db(transaction=True)
def test_fresh_agent_that_lost_the_state_directory_never_runs_the_surviving_run_beside_it(
    live_server: Any, state_dir: Path, tmp_path: Path,
) -> None:
    name = "gpu-twice-lost"
    ledger = tmp_path / "ledger"
    old, launched, never = _old_agent_dies_after_launching(live_server.url, state_dir, name, ledger)
    fresh = None
    try:
        # The node's state directory is gone (a new disk, a container's fresh volume): no token,
        # no records of what the old agent started. Its run still lives.
        shutil.rmtree(state_dir / name)
        fresh = _fresh_agent(live_server.url, state_dir, name)
        # Its registration (the bootstrap secret, the old agent's lease still running) cannot
        # tell it from another host's agent given this node's name: nothing is taken over.
        _runs_once(fresh, launched, never, ledger, taken_over=False)
    finally:
        _kill_marked(name, {g for g, _ in _ledger(ledger)})
        _hang_up(old, *([fresh] if fresh is not None else []))


@pytest.mark.django_db(transaction=True)
def test_a_job_that_ended_while_its_agent_could_not_tell_is_settled_as_it_ended_not_run_again(
    live_server: Any, state_dir: Path, tmp_path: Path,
) -> None:
    """The job exits 0 while its agent is cut off; the agent dies before telling. Until 8 Dec the
    exit died with it: the fresh agent's registration requeued the job as lost with its agent,
    and a job that had succeeded ran again. Its end is kept in the launch journal, and the fresh
    agent tells it (with the node's token) before it registers."""
    name = "gpu-twice-ended"
    fleet = build_loop_fleet()
    trigger = tmp_path / "finish"
    client = AgentClient(live_server.url)
    old = process_agent(live_server.url, state_dir, client, name=name)
    old.journal = LaunchJournal(state_dir / name / LAUNCHES_DIR)
    fresh = None
    try:
        drive(old, lambda: Node.objects.filter(name=name, state=NodeState.READY).exists())
        job = make_job(fleet, name="ends-unseen", command=f"while [ ! -e {trigger} ]; do sleep 0.05; done; exit 0")
        allocation = bind(job, {Node.objects.get(name=name): [0]})
        drive(old, lambda: Allocation.objects.get(pk=allocation.pk).started_at is not None)
        old.partitioned = True
        trigger.touch()
        drive(old, lambda: allocation.generation not in old.members)  # reaped, its exit unsent
        assert [r for r in old.outbox if r["kind"] == "exited" and r["exit_code"] == 0]

        fresh = _fresh_agent(live_server.url, state_dir, name, token=old.token)
        drive(fresh, lambda: fresh.registered, timeout=15)

        settled = Allocation.objects.get(pk=allocation.pk)
        assert settled.state == AllocationState.RELEASED and settled.generation == allocation.generation
        job.refresh_from_db()
        assert job.state == JobState.SUCCEEDED and job.requeue_count == 0
        assert not Event.objects.filter(kind=EventKind.ALLOCATION_FENCED, job=job).exists()
        assert LaunchJournal(state_dir / name / LAUNCHES_DIR).left() == []
    finally:
        _hang_up(old, *([fresh] if fresh is not None else []))
