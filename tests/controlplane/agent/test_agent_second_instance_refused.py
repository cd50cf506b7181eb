"""A second `qm-agent` for a node its state directory already serves exits at once, touching
nothing (controlplane/agent/main.hold_node_lock).

Until 8 Dec it started: its sweep killed the first agent's running job as "left behind" (the
first then reported it exited, -9, and the job failed), it registered in the first's place,
and each then took the node back from the other at every heartbeat, fencing what the other
had started. Real `qm-agent` processes, a real job, the real API on PostgreSQL.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.members import marked_processes
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Event, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import start_agent, stop_agent, wait_for
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job


@pytest.mark.django_db(transaction=True)
def test_a_second_agent_for_the_node_exits_and_the_first_ones_job_runs_on(
    live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any,
) -> None:
    fleet = build_loop_fleet()
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    second_log = open(tmp_path / "second.log", "wb")  # noqa: SIM115 - closed below
    first = start_agent(live_server.url, state_dir, "gpu-one-agent", log)
    second = None
    try:
        wait_for(lambda: Node.objects.filter(name="gpu-one-agent", state=NodeState.READY).exists(), 60, "the node")
        job = make_job(fleet, command="exec sleep 600", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        generation = Allocation.objects.get(job=job).generation
        wait_for(lambda: Allocation.objects.get(job=job).started_at is not None
                 and marked_processes("gpu-one-agent", {generation}), 60, "the job to run")
        (pid,) = marked_processes("gpu-one-agent", {generation})
        registrations = Event.objects.filter(node__name="gpu-one-agent", kind="node.registered").count()

        second = start_agent(live_server.url, state_dir, "gpu-one-agent", second_log)

        assert second.wait(timeout=60) == 2
        said = (tmp_path / "second.log").read_bytes()
        assert f"another qm-agent (pid {first.pid}) serves node gpu-one-agent".encode() in said
        assert b"killed processes a previous agent left behind" not in said
        # The first agent's job runs on, the node registered no more.
        for _ in range(2):  # now, and again after a couple of its heartbeats
            assert first.poll() is None
            assert marked_processes("gpu-one-agent", {generation}) == [pid]
            assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
            assert Event.objects.filter(node__name="gpu-one-agent", kind="node.registered").count() == registrations
            time.sleep(1.0)
    finally:
        for agent in (first, second):
            if agent is not None:
                stop_agent(agent)
        log.close()
        second_log.close()
