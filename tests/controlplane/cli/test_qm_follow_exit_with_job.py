"""`qm logs -f` and `qm events -f` exit 0 however the job ended (docs/api.md promised it); with
`--exit-with-job` they exit as the job did, as Slurm's `srun` and `sattach` carry a job's exit
status (services/exit_codes.followed_status): 0 when it succeeded, its exit code N when it failed
with N, the 143 of a job stopped by SIGTERM when cancelled, 1 when it ended with no code of its
own (cancelled before it started); a job preempted and requeued is followed into its next run,
and that run's end decides, not the preemption's 143 (the researcher audit, 7 Dec). A job stopped
at its runtime limit exits as its processes did on the stop (143 of SIGTERM, 137 of the SIGKILL at
the grace period's end); one stopped (cancelled, timed out) whose processes exited 0 on the
SIGTERM exits 1, where srun would say 0: it did not succeed, and `qm logs -f --exit-with-job &&
next` must not go on to `next` (docs/api.md says why). Each job's end is written by the real
transitions."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from django.utils import timezone

from controlplane.models import Allocation, Job
from controlplane.services import transitions
from tests.controlplane import factories as f
from tests.controlplane.cli.conftest import REPO, Run
from tests.controlplane.fleet_fixture import Fleet
from tests.controlplane.loop_fixtures import bind

pytestmark = pytest.mark.slow

COMMANDS = ["logs", "events"]


def _running(fleet: Fleet, gpu: int = 0) -> tuple[Job, Allocation]:
    job = f.make_job(fleet.ml, name="train", gpus=1, submitter=fleet.users["owner"])
    return job, bind(job, {fleet.nodes[0]: [gpu]})


def _exits(job: Job, allocation: Allocation, code: int) -> None:
    assert transitions.complete_release(allocation.pk, exit_code=code, at=timezone.now(), actor="agent:test")


def _cancelled_running(fleet: Fleet) -> Job:
    job, allocation = _running(fleet)
    assert transitions.cancel_job(job, "alice")
    _exits(job, allocation, 143)  # its processes stopped by SIGTERM
    return job


def _timed_out(fleet: Fleet, code: int) -> Job:
    """Stopped by the scheduler at its runtime limit (its SIGTERM), its processes then exiting
    with `code`."""
    job, allocation = _running(fleet)
    assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_RUNTIME_LIMIT,
                                   grace_period_s=30, at=timezone.now(), actor="scheduler",
                                   message="Reached its runtime limit of 1 h")
    _exits(job, allocation, code)
    return job


def _ended(fleet: Fleet, how: str) -> Job:
    if how == "cancelled while running":
        return _cancelled_running(fleet)
    if how == "cancelled while running, exited 0 on its SIGTERM":
        job, allocation = _running(fleet)
        assert transitions.cancel_job(job, "alice")
        _exits(job, allocation, 0)
        return job
    if how.startswith("timed out"):
        return _timed_out(fleet, int(how.rsplit(" ", 1)[1]))
    if how == "cancelled waiting":
        job = f.make_job(fleet.ml, name="train", gpus=1, submitter=fleet.users["owner"])
        assert transitions.cancel_job(job, "alice")
        return job
    job, allocation = _running(fleet)
    _exits(job, allocation, {"succeeded": 0, "failed 3": 3}[how])
    return job


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize(("how", "state", "status"), [
    ("succeeded", "succeeded", 0),
    ("failed 3", "failed", 3),
    ("cancelled while running", "cancelled", 143),
    ("cancelled waiting", "cancelled", 1),
    ("cancelled while running, exited 0 on its SIGTERM", "cancelled", 1),
    ("timed out 143", "timed_out", 143),
    ("timed out 137", "timed_out", 137),
    ("timed out 0", "timed_out", 1),
])
def test_a_follow_exits_as_the_job_ended_with_exit_with_job(alice_qm: Callable[..., Run], fleet: Fleet, command: str,
                                                            how: str, state: str, status: int) -> None:
    job = _ended(fleet, how)
    assert Job.objects.get(pk=job.pk).state == state  # the premise

    followed = alice_qm(command, str(job.pk), "-f", "--interval", "0.2", "--exit-with-job")
    plain = alice_qm(command, str(job.pk), "-f", "--interval", "0.2")

    assert followed.code == status, followed.err
    assert "Traceback" not in followed.err
    assert plain.code == 0, plain.err  # as docs/api.md promised: without the flag, 0 however it ended


@pytest.mark.parametrize("command", COMMANDS)
def test_a_preempted_and_requeued_job_is_followed_to_its_last_runs_end(qm: Callable[..., Run],
                                                                      alice_qm: Callable[..., Run], fleet: Fleet,
                                                                      command: str) -> None:
    """Preempted, its first run ends with 143 and the job waits again: the follow goes on into
    its next run, which fails with 7, and exits 7."""
    job, first = _running(fleet)
    follower = subprocess.Popen(
        [sys.executable, "-m", "controlplane.cli.main", command, str(job.pk), "-f", "--interval", "0.2",
         "--exit-with-job"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=qm.env, cwd=REPO,  # type: ignore[attr-defined]
    )
    try:
        time.sleep(1.0)  # it follows the first run
        assert follower.poll() is None
        assert transitions.signal_stop(first.pk, first.generation, reason=transitions.RELEASE_PREEMPTED,
                                       grace_period_s=30, at=timezone.now(), actor="scheduler",
                                       message="Preempted to make room for job 99")
        _exits(job, first, 143)
        assert Job.objects.get(pk=job.pk).state == "pending"  # requeued
        time.sleep(1.0)  # it saw the preemption and the requeue, and goes on
        assert follower.poll() is None, follower.communicate()
        second = bind(Job.objects.get(pk=job.pk), {fleet.nodes[0]: [1]})
        time.sleep(0.6)
        _exits(job, second, 7)
        out, err = follower.communicate(timeout=20)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()

    assert follower.returncode == 7, (out, err)
    assert "Traceback" not in err


@pytest.mark.parametrize("command", COMMANDS)
def test_exit_with_job_needs_a_follow(alice_qm: Callable[..., Run], fleet: Fleet, command: str) -> None:
    job = _ended(fleet, "failed 3")

    run = alice_qm(command, str(job.pk), "--exit-with-job")

    assert run.code == 2, run
    assert run.err == "error: --exit-with-job needs --follow: it exits as the job did once the job has ended\n"


def test_exit_with_job_of_the_fleets_events_is_refused_naming_it(alice_qm: Callable[..., Run], fleet: Fleet) -> None:
    run = alice_qm("events", "--exit-with-job")

    assert run.code == 2, run
    assert run.err == "error: --exit-with-job watches one job: give its id (qm events JOB --follow)\n"
