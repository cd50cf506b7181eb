"""A real `qm-agent` process whose contact the real control plane refuses (400) for one report
sets that report aside in `<state-dir>/<node>/refused.jsonl`, keeps its node's lease, and runs
the next job to completion.

test_agent_refused_contact_isolated.py drives `NodeAgent` in this process; this one starts the
console script, so what it adds is the wiring of `qm-agent` itself: where refused.jsonl goes
(main.py's `refused_path`), that the process lives on and says why in its log. The refusal is
a real one: a simulated job whose `QM_SIM_EXIT_CODE` is 300 ends with that code, which no
process can have and the control plane refuses (`reports.N.exit_code`, -255..255), as it
refuses the whole contact with it. (A process-running agent sends nothing today's control plane
refuses of its own accord: its messages, output, progress and exit codes are all bounded on the
node; hence `--simulate`, whose job's exit code is the job's env.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import CHECKOUT, QM_AGENT, stop_agent, wait_for
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job


def _json_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for line in path.read_text(errors="replace").splitlines() if path.exists() else []:
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


@pytest.mark.django_db(transaction=True)
def test_a_qm_agent_process_sets_a_refused_exit_aside_keeps_contacting_and_runs_the_next_job(
        live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any) -> None:
    import subprocess

    fleet = build_loop_fleet()
    log_path = tmp_path / "agent.log"
    argv = [QM_AGENT, "--server", live_server.url, "--simulate", "1", "--name-prefix", "refd-", "--gpus", "2",
            "--gpu-type", "H100-80GB", "--pool", "h100", "--leaf-switch", "leaf-1", "--spine", "spine-1",
            "--state-dir", str(state_dir), "--interval", "0.5", "--sample-interval", "60", "--no-wake",
            "--log-format", "json"]
    with open(log_path, "wb") as log:
        agent = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "QM_AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP,
                 "PYTHONPATH": os.pathsep.join(filter(None, [CHECKOUT, os.environ.get("PYTHONPATH")]))})
        try:
            wait_for(lambda: Node.objects.filter(name="refd-000", state=NodeState.READY).exists(), 60, "the node")
            odd = make_job(fleet, gpus=1, name="odd-exit", submitter=submitter,
                           env={"QM_SIM_DURATION_S": "0.5", "QM_SIM_EXIT_CODE": "300"})
            assert cycle.run_cycle("test").binds == 1
            odd_generation = Allocation.objects.get(job=odd).generation
            refused_file = state_dir / "refd-000" / "refused.jsonl"
            wait_for(refused_file.exists, 60, "the refused exit in refused.jsonl")
            # its exit went again without the code refused, and the job ended on it
            wait_for(lambda: Job.objects.get(pk=odd.pk).state not in (JobState.PENDING, JobState.RUNNING), 30,
                     "the odd job to end")
            refused_at = timezone.now()
            wait_for(lambda: Node.objects.get(name="refd-000").last_heartbeat_at > refused_at, 10,
                     "a heartbeat after the refusal")

            later = make_job(fleet, gpus=2, name="later", submitter=submitter, env={"QM_SIM_DURATION_S": "0.5"})
            assert cycle.run_cycle("test").binds == 1
            wait_for(lambda: Job.objects.get(pk=later.pk).state == JobState.SUCCEEDED, 60, "the later job to succeed")
            assert agent.poll() is None, "qm-agent exited"
            assert Node.objects.get(name="refd-000").state == NodeState.READY
        finally:
            stop_agent(agent)

    (kept,) = _json_lines(refused_file)
    assert kept["node"] == "refd-000" and kept["status"] == 400 and kept["kind"] == "exited"
    assert kept["generation"] == odd_generation and kept["data"]["exit_code"] == 300
    assert list(kept["errors"]) == [kept["element"] + ".exit_code"] and kept["element"].startswith("reports.")
    assert kept["sent_again"]["exit_code"] is None and kept["sent_again"]["generation"] == odd_generation
    odd.refresh_from_db()
    assert odd.state == JobState.FAILED and odd.exit_code is None, (odd.state, odd.exit_code)
    said = _json_lines(log_path)
    (refusal,) = [e for e in said if str(e.get("event", "")).startswith("the control plane refused part of a contact")]
    assert refusal["level"] == "error" and refusal["generation"] == odd_generation
    assert refusal["kept_in"] == str(refused_file)
    assert not [e for e in said if e.get("event") == "control plane refused the request"]
    assert Event.objects.filter(job=later, kind=EventKind.JOB_FINISHED).exists()
    # and the control plane recorded the refusal for the node
    (event,) = Event.objects.filter(node__name="refd-000", kind=EventKind.NODE_AGENT_REFUSED)
    assert list(event.data["errors"]) == [f"{kept['element']}.exit_code"] and event.data["generations"] == [
        odd_generation], event.data
