"""What a job writes as its progress (`$QM_PROGRESS_FILE`) cannot stop the agent: a value out of
range is ignored, a progress file that cannot be read is not read (controlplane/agent/members.py,
apply_progress_line and ProcessMember._read_progress); nor what it makes of the files of its run
directory the agent reads and writes (its progress file, its output, its shipping record: a
FIFO, a link to /dev/zero), which the agent opens only as regular files (logs.open_regular).

Found on 5 Dec, looking for other ways one run's doing ended the agent's round (as a launch
error did, test_sre_agent_launch_error_of_any_kind.py): `{"steps": 1e400}` (JSON's reader makes
it infinity) raised OverflowError when the agent read it, `{"last_checkpoint_at": 1e300}` when it
reported it, and a job that made its progress file a directory raised IsADirectoryError at each
look. Each went up out of `qm-agent`, which exited; its reaper killed every run on the node.
Real `qm-agent`, real processes.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from controlplane.agent.members import marked_processes
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.real_agent import start_agent, stop_agent, wait_for
from tests.controlplane.agent.test_agent_ships_logs import output
from tests.controlplane.loop_fixtures import build_loop_fleet, make_job

WRITES = {
    "infinite-steps": """echo '{"steps": 1e400}' >> "$QM_PROGRESS_FILE"; sleep 0.3""",
    "nan-tokens": """echo '{"steps": 5, "useful_tokens": NaN}' >> "$QM_PROGRESS_FILE"; sleep 0.3""",
    "checkpoint-in-year-1e292": """echo '{"last_checkpoint_at": 1e300}' >> "$QM_PROGRESS_FILE"; sleep 0.3""",
    "progress-file-a-directory": """mkdir "$QM_PROGRESS_FILE"; sleep 0.3""",
    # Found on 5 Dec too: files of its run directory the agent opens by name, made by the job
    # into what an open or a read never returns from. Its loop hung in the open (a FIFO read
    # waits for a writer, a FIFO write for a reader) or read for ever (/dev/zero): it stopped
    # heartbeating, its lease ran out and the control plane fenced every run on the node.
    "progress-file-a-fifo": """mkfifo "$QM_PROGRESS_FILE"; sleep 0.3""",
    "progress-file-endless": """ln -s /dev/zero "$QM_PROGRESS_FILE"; sleep 0.3""",
    # (`&&`: the job succeeds only if it did change the agent's file; AGENTS_FILES below)
    "output-file-a-fifo": """echo started; sleep 1; rm rank0.log && mkfifo rank0.log && sleep 0.3""",
    "output-file-endless": """echo started; sleep 1; rm rank0.log && ln -s /dev/zero rank0.log && sleep 0.3""",
    "shipping-record-a-fifo": """mkfifo shipped.json.tmp && sleep 0.2 && echo printed && sleep 0.3""",
    # a line nested 100,000 deep: Python's JSON reader raises RecursionError, not ValueError
    "progress-line-nested-deeply": """printf '%*s\\n' 100000 '' | tr ' ' '[' >> "$QM_PROGRESS_FILE"; sleep 0.3""",
}
#: The cases that change the agent's own files in the run directory, which only a job run as the
#: agent's user can (an agent not root, or given --job-user agent): run as its submitter, the
#: default of a root agent, the job works in `work/` and its `rm rank0.log` would find nothing.
#: The others write their progress file, which is the job's in either mode.
AGENTS_FILES = {"output-file-a-fifo", "output-file-endless", "shipping-record-a-fifo"}


@pytest.mark.parametrize("case", list(WRITES))
@pytest.mark.django_db(transaction=True)
def test_sre_a_job_writing_progress_out_of_range_or_unreadable_succeeds_and_the_agent_serves_on(
        live_server: Any, tmp_path: Path, state_dir: Path, submitter: Any, case: str) -> None:
    fleet = build_loop_fleet()
    node = f"gpu-progress-{list(WRITES).index(case)}"  # its own: the cases may run side by side
    log = open(tmp_path / "agent.log", "wb")  # noqa: SIM115 - closed below
    agent = start_agent(live_server.url, state_dir, node, log,
                        options=("--no-wake", "--sample-interval", "0.2",
                                 *(("--job-user", "agent") if case in AGENTS_FILES else ())))
    try:
        wait_for(lambda: Node.objects.filter(name=node, state=NodeState.READY).exists(), 60, "the node")
        steady = make_job(fleet, name="steady", command="exec sleep 120", submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        wait_for(lambda: Job.objects.get(pk=steady.pk).state == JobState.RUNNING, 60, "the steady job to run")
        steady_generation = Allocation.objects.get(job=steady).generation
        wait_for(lambda: marked_processes(node, {steady_generation}), 30, "the steady job's process")
        steady_pids = marked_processes(node, {steady_generation})

        job = make_job(fleet, name=case, command=WRITES[case], submitter=submitter)
        assert cycle.run_cycle("test").binds == 1
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 60, f"the job ({case}) to succeed")

        assert agent.poll() is None, "the agent died of what a job wrote as its progress"
        if case.startswith("output-file"):
            # what it printed before is shipped, and nothing of what it put in its file's place
            # (before, /dev/zero's NULs were shipped as U+FFFD for as long as the agent ran)
            wait_for(lambda: output(job) == "started\n", 30, "the job's first line")
            time.sleep(1.0)
            assert output(job) == "started\n"
        if case == "nan-tokens":
            assert Job.objects.get(pk=job.pk).steps == 5, "a line's good values still count"
        assert Job.objects.get(pk=steady.pk).state == JobState.RUNNING
        assert set(steady_pids) <= set(marked_processes(node, {steady_generation})), "the other job's process died"
    finally:
        stop_agent(agent)
        log.close()
    text = (tmp_path / "agent.log").read_text()
    assert "Traceback" not in text, text[-3000:]


def test_a_restarts_sweep_survives_what_jobs_made_of_their_pgids_records(tmp_path: Path) -> None:
    # A job may write its run's `pgids` (the agent's record of its process groups), or make it
    # a directory: before 5 Dec the next agent's start raised (ValueError, IsADirectoryError)
    # in its sweep, and `qm-agent` could not start on the node until someone cleaned it up.
    from controlplane.agent.members import ProcessLauncher

    root = tmp_path / "gpu-pgids"
    for name, make in (("g1", lambda p: p.write_text("12 not-a-pid\n")), ("g2", lambda p: p.mkdir()),
                       ("g3", lambda p: os.mkfifo(p))):
        (root / name).mkdir(parents=True)
        make(root / name / "pgids")
    assert ProcessLauncher(tmp_path, "gpu-pgids", devices=None, cgroup_root="off").sweep_leftovers() == []
    assert not (root / "g1" / "pgids").exists() and not (root / "g3" / "pgids").exists()
