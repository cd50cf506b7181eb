"""`qm logs JOB [-f]`: a job's output as its agents shipped it, one rank or all of them, followed
across its runs until it ends; Ctrl-C ends a follow between two reads."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

from controlplane.cli import arguments, output
from controlplane.cli.client import Api, CliError
from controlplane.cli.jobs.states import FINISHED_STATES

#: `qm logs`'s API parameters → its flags, as client.refusal names them.
LOGS_FLAGS = {"rank": "rank", "generation": "generation", "tail_lines": "tail"}


class _RankOutput:
    """One rank's output as `qm logs` prints it: raw, or each line prefixed `[rank N] ` (a
    line that has not ended yet waits for its end, so two ranks' halves never share a line)."""

    def __init__(self, rank: int, prefixed: bool) -> None:
        self.rank, self.prefixed, self.partial = rank, prefixed, ""
        self.next_offset: int | None = None

    def write(self, text: str) -> None:
        if not self.prefixed:
            sys.stdout.write(text)
            return
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            sys.stdout.write(f"[rank {self.rank}] {line}\n")

    def close(self) -> None:
        if self.prefixed and self.partial:
            sys.stdout.write(f"[rank {self.rank}] {self.partial}\n")
            self.partial = ""


def _read_logs(api: Api, job_id: int, params: dict[str, Any]) -> dict[str, Any]:
    return api.request("GET", f"jobs/{job_id}/logs/", params={k: v for k, v in params.items() if v is not None})


def cmd_logs(api: Api, args: argparse.Namespace) -> int:
    """A job's output (stdout and stderr), as its agents shipped it: rank 0 of its latest run by
    default. --follow keeps printing what comes until the job has ended (Ctrl-C stops it). What
    qm says about the output (pruned bytes, a new run) goes to standard error, so standard
    output holds the job's own bytes only."""
    job_id = arguments.job_id(args.job)
    if args.tail is not None and not 0 < args.tail <= 10_000:
        raise CliError(f"--tail {args.tail}: give a number of lines from 1 to 10000")
    if not 0 < args.interval <= 3600:
        raise CliError(f"--interval {args.interval}: give a number of seconds above 0, at most 3600")
    if args.rank is not None and args.rank < 0:
        raise CliError(f"--rank {args.rank}: ranks count from 0")
    first = _read_logs(api, job_id, {"rank": args.rank or 0, "generation": args.generation, "tail_lines": args.tail})
    generation = first["generation"]
    ranks = (first["ranks"] or [0]) if args.all_ranks else [args.rank or 0]
    outputs = {rank: _RankOutput(rank, prefixed=args.all_ranks) for rank in ranks}

    def say(words: str) -> None:
        if not args.json:
            sys.stdout.flush()
            print(output.visible(words), file=sys.stderr, flush=True)

    def show(rank: int, reply: dict[str, Any]) -> bool:
        outputs[rank].next_offset = reply["next_offset"]
        if args.json:
            if reply["text"] or not args.follow:
                output.emit_json_line(reply)
            return bool(reply["text"])
        if reply["notice"] and (reply["text"] or not args.follow):
            say(reply["notice"])
        outputs[rank].write(reply["text"])
        return bool(reply["text"])

    def drain(rank: int, reply: dict[str, Any]) -> bool:
        """Show `reply` and what is stored after it now; whether any text came."""
        got = show(rank, reply)
        while reply["more"]:
            reply = _read_logs(api, job_id, {"rank": rank, "generation": reply["generation"],
                                             "offset": reply["next_offset"]})
            got = show(rank, reply) or got
        return got

    def close() -> None:
        for out in outputs.values():
            out.close()
        sys.stdout.flush()

    for rank in ranks:
        drain(rank, first if rank == first["rank"] else _read_logs(
            api, job_id, {"rank": rank, "generation": generation, "tail_lines": args.tail}))
    sys.stdout.flush()
    if not args.follow:
        close()
        return 0
    if first["job_state"] in FINISHED_STATES:
        close()
        say(f"--- job {job_id} ended {first['job_state']} ---")
        return 0
    # Ctrl-C ends the follow between two reads, not inside one: a KeyboardInterrupt raised in
    # the middle of an HTTP request could leave the connection pool's lock held, and the
    # process hung on its way out (seen under load). A second Ctrl-C interrupts at once.
    with _ctrl_c_between_rounds() as stopped:
        while not stopped.wait(args.interval):
            got = False
            latest: dict[str, Any] = {}
            for rank, out in list(outputs.items()):
                latest = _read_logs(api, job_id, {"rank": rank, "generation": generation, "offset": out.next_offset})
                got = drain(rank, latest) or got
            sys.stdout.flush()
            if generation is None and latest["generation"] is not None:
                generation = latest["generation"]  # its first run began: what was read is its output
                say(f"--- job {job_id} started: generation {generation} ---")
            elif args.generation is None and latest["generations"] and latest["generations"][-1] != generation:
                # The job runs again (requeued, preempted): follow the new run from its first byte.
                close()
                generation = latest["generations"][-1]
                say(f"--- job {job_id} runs again: generation {generation} ---")
                outputs = {rank: _RankOutput(rank, prefixed=args.all_ranks) for rank in outputs}
                for out in outputs.values():
                    out.next_offset = 0
                continue
            if args.all_ranks:
                for rank in latest["ranks"]:
                    if rank not in outputs:  # a rank that wrote its first bytes since
                        outputs[rank] = _RankOutput(rank, prefixed=True)
                        outputs[rank].next_offset = 0
            if latest["job_state"] in FINISHED_STATES and not got:
                # Ended, and a round brought nothing more: its last lines came with the exit (more
                # than 64 KiB a rank follow within a second, and are read above while they come).
                close()
                say(f"--- job {job_id} ended {latest['job_state']} ---")
                return 0
    close()
    return 130


class _CtrlC:
    """Whether Ctrl-C was pressed. The handler only sets a flag (it takes no lock: one taken
    inside a handler can be the lock the interrupted code holds)."""

    def __init__(self) -> None:
        self.pressed = False

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, in short naps so a Ctrl-C ends it soon; whether it came."""
        until = time.monotonic() + seconds
        while not self.pressed and (left := until - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))
        return self.pressed


@contextlib.contextmanager
def _ctrl_c_between_rounds() -> Iterator[_CtrlC]:
    """While inside, the first Ctrl-C is noted (the loop stops at its next check) instead of
    raising; a second one raises KeyboardInterrupt as usual."""
    ctrl_c = _CtrlC()

    def on_ctrl_c(signum: int, frame: Any) -> None:
        if ctrl_c.pressed:
            raise KeyboardInterrupt
        ctrl_c.pressed = True

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield ctrl_c
    finally:
        signal.signal(signal.SIGINT, previous)
