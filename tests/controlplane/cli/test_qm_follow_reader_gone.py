"""`qm events --follow | head -3` and `qm logs -f JOB | head -3`: once the reader has gone, qm
ends within about a second, quietly, killed by SIGPIPE as `cat` or `yes` are. Until 6 Dec it
noticed the closed pipe only at its next write, so a follow of a quiet job went on until the
job's next event or output, or its end (hours, for a training run).

Real processes: `qm` following against the live server, its standard output a pipe whose read
end the test closes, as `head` does when it has its lines."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable

from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Node
from controlplane.services import job_logs, transitions
from tests.controlplane import factories as f
from tests.controlplane.cli.conftest import REPO, Run
from tests.controlplane.fleet_fixture import Fleet
from tests.controlplane.loop_fixtures import bind


def _read_then_leave(qm: Callable[..., Run], args: list[str], lines: int) -> tuple[list[bytes], float, int, bytes]:
    """Start `qm ARGS`, read `lines` lines of its output, close the pipe as `head` does; the
    lines, how long qm took to end after that, its return code and what it said on stderr."""
    follower = subprocess.Popen([sys.executable, "-m", "controlplane.cli.main", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=qm.env, cwd=REPO)  # type: ignore[attr-defined]
    try:
        assert follower.stdout is not None and follower.stderr is not None
        read = [follower.stdout.readline() for _ in range(lines)]
        time.sleep(0.5)  # it is waiting for its next round now
        follower.stdout.close()
        left = time.monotonic()
        try:
            follower.wait(timeout=8)
        except subprocess.TimeoutExpired:
            pass
        took = time.monotonic() - left
        assert follower.returncode is not None, f"qm still following {took:.1f} s after its reader left"
        return read, took, follower.returncode, follower.stderr.read()
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()


def test_events_follow_ends_when_its_reader_has_gone(qm: Callable[..., Run], alice_qm: Callable[..., Run],
                                                    fleet: Fleet) -> None:
    job = f.make_job(fleet.ml, name="quiet", submitter=fleet.users["owner"])
    for words in ("submitted", "still waiting"):
        transitions.record_event(EventKind.JOB_SUBMITTED, "alice", job=job, message=words)

    read, took, code, err = _read_then_leave(qm, ["events", str(job.pk), "--follow"], 3)

    assert read[0].startswith(b"TIME (UTC)") and b"still waiting" in read[2], read
    assert took < 1.5, f"{took:.2f} s"
    assert code == -signal.SIGPIPE, (code, err)
    assert err == b""


def test_logs_follow_ends_when_its_reader_has_gone(qm: Callable[..., Run], alice_qm: Callable[..., Run],
                                                  fleet: Fleet) -> None:
    job = f.make_job(fleet.ml, name="train", submitter=fleet.users["owner"])
    generation = bind(job, {fleet.nodes[0]: [0]}).generation
    text = "step 1\nstep 2\nstep 3\n"
    node = Node.objects.get(name=fleet.nodes[0].name)
    job_logs.store(node.pk, node.name, [job_logs.Chunk(generation, 0, 0, len(text), text)], now=timezone.now())

    read, took, code, err = _read_then_leave(qm, ["logs", str(job.pk), "-f"], 3)

    assert read == [b"step 1\n", b"step 2\n", b"step 3\n"]
    assert took < 1.5, f"{took:.2f} s"
    assert code == -signal.SIGPIPE, (code, err)
    assert err == b""


def test_a_list_cut_short_by_its_reader_ends_as_sigpipe_does(alice_qm: Callable[..., Run], fleet: Fleet,
                                                              qm: Callable[..., Run]) -> None:
    # The same ending when the pipe's close is found by a write: `qm list | head -2`, more
    # than a pipe holds. It returned 0 until 6 Dec, so `set -o pipefail` scripts could not
    # tell it from a list read to its end.
    for i in range(500):  # 500 lines of ~130 characters
        f.make_job(fleet.ml, name=f"{i:04d}-" + "x" * 120)
    follower = subprocess.Popen([sys.executable, "-m", "controlplane.cli.main", "list", "--all", "--limit", "1000"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=qm.env,  # type: ignore[attr-defined]
                                cwd=REPO)
    assert follower.stdout is not None and follower.stderr is not None
    follower.stdout.readline()
    follower.stdout.close()
    follower.wait(timeout=30)

    assert follower.returncode == -signal.SIGPIPE
    assert follower.stderr.read() == b""
    follower.stderr.close()
