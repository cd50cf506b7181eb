"""`qm logs JOB [--rank N | --all-ranks] [--tail N] [--generation G] [-f]`: a job's output, as
`kubectl logs`, Slurm's slurm-<id>.out and `runai logs` give it. Standard output carries the
job's own bytes only; what qm says about them goes to standard error."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time
import tty
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.cli.jobs.logs import _RankOutput
from controlplane.models import Allocation, Job, Node
from controlplane.services import job_logs, reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.cli.conftest import REPO, Run
from tests.controlplane.fleet_fixture import Fleet
from tests.controlplane.loop_fixtures import bind


def ship(job: Job, generation: int, offset: int, text: str, rank: int = 0, node: str = "h100-0") -> int:
    """What an agent's heartbeat carrying this chunk stores; returns the next offset."""
    n = Node.objects.get(name=node)
    job_logs.store(n.pk, n.name, [job_logs.Chunk(generation, rank, offset, len(text.encode()), text)],
                   now=timezone.now())
    return offset + len(text.encode())


def running(fleet: Fleet, gpus: list[int] | None = None) -> tuple[Job, int]:
    job = f.make_job(fleet.ml, name="train-llm", gpus=len(gpus or [0]), submitter=fleet.users["owner"])
    return job, bind(job, {fleet.nodes[0]: gpus or [0]}).generation


def test_qm_logs_prints_the_jobs_output_as_written(alice_qm: Callable[..., Run], fleet: Fleet) -> None:
    job, g = running(fleet)
    ship(job, g, 0, "loading shards\nstep 1 loss 3.2\n\x1b[32mok\x1b[0m\n")

    run = alice_qm("logs", str(job.pk))

    assert run.code == 0, run.err
    assert run.out == "loading shards\nstep 1 loss 3.2\n\x1b[32mok\x1b[0m\n"  # raw, colours and all
    assert run.err == ""


HOSTILE = "step 1 \x1b[32mok\x1b[0m\n\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;root@prod\x07\x1b[2J\x1b[H\tdone\r\n"


def on_a_terminal(qm: Callable[..., Run], *args: str) -> str:
    """What `qm` writes to a terminal (a pseudo-terminal in raw mode: bytes as written)."""
    main, tty_side = pty.openpty()
    tty.setraw(tty_side)
    try:
        done = subprocess.run([sys.executable, "-m", "controlplane.cli.main", *args], stdout=tty_side,
                              stderr=subprocess.PIPE, env=qm.env, cwd=REPO, timeout=60)  # type: ignore[attr-defined]
        assert done.returncode == 0, done.stderr
        os.close(tty_side)
        got = b""
        with contextlib.suppress(OSError):  # EIO: the terminal's other side has closed
            while chunk := os.read(main, 65536):
                got += chunk
        return got.decode()
    finally:
        os.close(main)
        with contextlib.suppress(OSError):
            os.close(tty_side)


def test_qm_logs_on_a_terminal_keeps_colours_but_shows_other_escapes(qm: Callable[..., Run],
                                                                    alice_qm: Callable[..., Run],
                                                                    fleet: Fleet) -> None:
    """A job's output could set the reader's clipboard (OSC 52), window title or clear the
    screen; on a terminal those are shown as escapes, as `less -R` does, and colours stay."""
    job, g = running(fleet)
    ship(job, g, 0, HOSTILE)

    shown = on_a_terminal(qm, "logs", str(job.pk))

    assert shown == ("step 1 \x1b[32mok\x1b[0m\n\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b]0;root@prod\\x07"
                     "\\x1b[2J\\x1b[H\tdone\r\n")
    assert on_a_terminal(qm, "logs", str(job.pk), "--raw") == HOSTILE
    assert on_a_terminal(qm, "logs", str(job.pk), "--all-ranks").startswith("[rank 0] step 1 \x1b[32mok")
    piped = subprocess.run([sys.executable, "-m", "controlplane.cli.main", "logs", str(job.pk)], capture_output=True,
                           env=qm.env, cwd=REPO, timeout=60)  # type: ignore[attr-defined]
    assert piped.stdout.decode() == HOSTILE  # redirected or piped: the job's bytes as written


def test_qm_logs_holds_a_colour_cut_between_two_reads_for_the_next(capsys: pytest.CaptureFixture[str]) -> None:
    out = _RankOutput(0, prefixed=False, guarded=True)
    out.write("loss \x1b[3")
    out.write("1m3.2\x1b[0m\n\x1b")
    out.close()

    assert capsys.readouterr().out == "loss \x1b[31m3.2\x1b[0m\n\\x1b"


def test_qm_logs_tail_prints_the_last_lines(alice_qm: Callable[..., Run], fleet: Fleet) -> None:
    job, g = running(fleet)
    ship(job, g, 0, "".join(f"step {i}\n" for i in range(1, 101)))

    run = alice_qm("logs", str(job.pk), "--tail", "2")

    assert run.code == 0 and run.out == "step 99\nstep 100\n"


def test_qm_logs_all_ranks_marks_each_line_with_its_rank(alice_qm: Callable[..., Run], fleet: Fleet) -> None:
    job, g = running(fleet, [0, 1])
    ship(job, g, 0, "zero a\nzero b\n", rank=0)
    ship(job, g, 0, "one a\nno newline yet", rank=1)

    run = alice_qm("logs", str(job.pk), "--all-ranks")

    assert run.code == 0, run.err
    assert run.out == "[rank 0] zero a\n[rank 0] zero b\n[rank 1] one a\n[rank 1] no newline yet\n"
    assert alice_qm("logs", str(job.pk), "--rank", "1").out == "one a\nno newline yet"


def test_qm_logs_follow_prints_new_output_until_the_job_ends(qm: Callable[..., Run], alice_qm: Callable[..., Run],
                                                            fleet: Fleet) -> None:
    job, g = running(fleet)
    at = ship(job, g, 0, "epoch 1\n")
    follower = subprocess.Popen(
        [sys.executable, "-m", "controlplane.cli.main", "logs", str(job.pk), "-f", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=qm.env, cwd=REPO,  # type: ignore[attr-defined]
    )
    try:
        time.sleep(1.0)
        at = ship(job, g, at, "epoch 2\n")
        time.sleep(0.6)
        ship(job, g, at, "done\n")
        Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, finished_at=timezone.now(), exit_code=0)
        out, err = follower.communicate(timeout=20)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()

    assert follower.returncode == 0, err
    assert out == "epoch 1\nepoch 2\ndone\n"
    assert err == f"--- job {job.pk} succeeded ---\n"


def test_qm_logs_follow_goes_on_into_a_requeued_jobs_next_run(qm: Callable[..., Run], alice_qm: Callable[..., Run],
                                                             fleet: Fleet) -> None:
    job, first = running(fleet)
    ship(job, first, 0, "run 1: step 1\n")
    follower = subprocess.Popen(
        [sys.executable, "-m", "controlplane.cli.main", "logs", str(job.pk), "-f", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=qm.env, cwd=REPO,  # type: ignore[attr-defined]
    )
    try:
        assert follower.stdout is not None and follower.stdout.readline() == "run 1: step 1\n"
        with transaction.atomic():  # its node was lost: fenced, requeued whole, bound again
            allocation = Allocation.objects.get(job=job)
            assert transitions.fence_allocation(allocation.pk, lease=reconcile.lock_scheduler_lease(),
                                                at=timezone.now(), actor="test", reason="test")
        second = bind(Job.objects.get(pk=job.pk), {fleet.nodes[0]: [1]}).generation
        ship(job, second, 0, "run 2: resumed from checkpoint\n")
        time.sleep(1.0)
        Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, finished_at=timezone.now(), exit_code=0)
        out, err = follower.communicate(timeout=20)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()

    assert follower.returncode == 0, err
    assert out == "run 2: resumed from checkpoint\n"
    assert err == (f"--- job {job.pk} runs again: run 2 (lease generation {second}) ---\n"
                   f"--- job {job.pk} succeeded ---\n")


def test_qm_logs_follow_stops_cleanly_on_ctrl_c(qm: Callable[..., Run], alice_qm: Callable[..., Run],
                                                fleet: Fleet) -> None:
    job, g = running(fleet)
    ship(job, g, 0, "waiting for data\n")
    follower = subprocess.Popen(
        [sys.executable, "-m", "controlplane.cli.main", "logs", str(job.pk), "--follow", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=qm.env, cwd=REPO,  # type: ignore[attr-defined]
    )
    assert follower.stdout is not None
    first = follower.stdout.readline()  # it is following now
    time.sleep(0.5)
    follower.send_signal(signal.SIGINT)
    out, err = follower.communicate(timeout=10)

    assert follower.returncode == 130
    assert first + out == "waiting for data\n" and "Traceback" not in err


def test_qm_logs_says_pruned_bytes_on_standard_error(alice_qm: Callable[..., Run], fleet: Fleet,
                                                     settings: Any) -> None:
    settings.QM = {**settings.QM, "JOB_LOG_KEEP_BYTES_PER_RANK": 1000}
    job, g = running(fleet)
    at = 0
    for i in range(6):
        at = ship(job, g, at, f"{i}" * 499 + "\n")

    run = alice_qm("logs", str(job.pk))

    assert run.code == 0
    assert run.err == "… 2000 bytes earlier were pruned (the last 1000 bytes of each rank's output are kept).\n"
    assert run.out == "".join(f"{i}" * 499 + "\n" for i in range(4, 6))


def test_qm_logs_of_another_teams_job_is_refused_as_for_the_job(qm: Callable[..., Run], fleet: Fleet) -> None:
    job, g = running(fleet)
    ship(job, g, 0, "private\n")
    assert qm("login", "--username", "bob", "--password-stdin", stdin="bob\n").code == 0

    run = qm("logs", str(job.pk))

    assert run.code == 1 and run.out == ""
    assert f"No job {job.pk}, or not yours to see." in run.err


@pytest.mark.parametrize(("args", "words", "code"), [
    # --tail 0 and --rank -2 are refused when parsed, exit 2: test_qm_counts_refused_before_asking.py.
    (["--interval", "0"], "--interval 0.0: give a number of seconds above 0", 2),  # by qm, before asking
    (["--generation", "999999"], "generation", 1),  # by the server
], ids=["zero-interval", "unknown-generation"])
def test_qm_logs_refuses_a_bad_option_naming_it(alice_qm: Callable[..., Run], fleet: Fleet, args: list[str],
                                                words: str, code: int) -> None:
    job, _ = running(fleet)

    run = alice_qm("logs", str(job.pk), *args)

    assert run.code == code and words in run.err and "Traceback" not in run.err


def test_qm_logs_follow_of_a_job_not_started_says_it_waits_for_it(qm: Callable[..., Run], alice_qm: Callable[..., Run],
                                                                   fleet: Fleet) -> None:
    """`qm logs -f` right after `qm submit` printed nothing at all while the job waited, as if it
    hung or the job had no output; it now says, once, that the job has not started and that it
    follows until it does, then the output as it comes."""
    job = f.make_job(fleet.ml, name="queued", state=JobState.PENDING)
    follower = subprocess.Popen(
        [sys.executable, "-m", "controlplane.cli.main", "logs", str(job.pk), "-f", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=qm.env, cwd=REPO,  # type: ignore[attr-defined]
    )
    try:
        assert follower.stderr is not None
        # before the job does anything (nothing said in 10 s: "")
        said = follower.stderr.readline() if select.select([follower.stderr], [], [], 10)[0] else ""
        g = bind(Job.objects.get(pk=job.pk), {fleet.nodes[0]: [0]}).generation
        ship(job, g, 0, "step 1\n")
        time.sleep(1.0)
        Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, finished_at=timezone.now(), exit_code=0)
        out, err = follower.communicate(timeout=20)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()

    assert said == (f"--- job {job.pk} has not started yet (pending): its output follows once it does "
                    f"(qm explain {job.pk}: why it waits) ---\n")
    assert follower.returncode == 0, err
    assert out == "step 1\n"
    assert err == (f"--- job {job.pk} started: run 1 (lease generation {g}) ---\n--- job {job.pk} succeeded ---\n")
