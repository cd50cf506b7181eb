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
from controlplane.cli.client import Api, UsageError
from controlplane.cli.jobs.states import FINISHED_STATES, ended_words
from controlplane.services import exit_codes
from controlplane.services.run_text import run_named

#: `qm logs`'s API parameters → its flags, as client.refusal names them.
LOGS_FLAGS = {"rank": "rank", "generation": "generation", "tail_lines": "tail"}


class _RankOutput:
    """One rank's output as `qm logs` prints it: as written, or each line prefixed `[rank N] ` (a
    line that has not ended yet waits for its end, so two ranks' halves never share a line); on
    a terminal (unless --raw) with its escape sequences other than colours shown as escapes."""

    def __init__(self, rank: int, prefixed: bool, guarded: bool) -> None:
        self.rank, self.prefixed, self.guarded, self.partial, self.held = rank, prefixed, guarded, "", ""
        self.next_offset: int | None = None

    def write(self, text: str) -> None:
        if self.guarded:
            text, self.held = output.terminal_output(self.held + text)
        if not self.prefixed:
            sys.stdout.write(text)
            return
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            sys.stdout.write(f"[rank {self.rank}] {line}\n")

    def close(self) -> None:
        if self.held:  # the output ended inside a sequence: it is shown as an escape
            held, self.held = output.visible(self.held), ""
            if self.prefixed:
                self.partial += held
            else:
                sys.stdout.write(held)
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
    # --tail and --rank are refused when parsed (main._last_lines, main._rank), before any request.
    if not 0 < args.interval <= 3600:
        raise UsageError(f"--interval {args.interval}: give a number of seconds above 0, at most 3600")
    if args.exit_with_job and not args.follow:
        raise UsageError("--exit-with-job needs --follow: it exits as the job did once the job has ended")
    first = _read_logs(api, job_id, {"rank": args.rank or 0, "generation": args.generation, "tail_lines": args.tail})
    ranks = (first["ranks"] or [0]) if args.all_ranks else [args.rank or 0]
    logs = _Logs(api, job_id, args, first["generation"], ranks)
    for rank in ranks:
        logs.drain(rank, first if rank == first["rank"] else logs.read(
            {"rank": rank, "generation": logs.generation, "tail_lines": args.tail}))
    sys.stdout.flush()
    if not args.follow:
        logs.close()
        return 0
    if first["job_state"] in FINISHED_STATES:
        logs.close()
        logs.say(f"--- job {job_id} {ended_words(first['job_state'])} ---")
        return _ended_status(api, job_id, args)
    if first["generation"] is None:
        # Said once: a follow of a job that waits printed nothing at all, as if qm hung.
        logs.say(f"--- job {job_id} has not started yet ({first['job_state']}): its output follows once it does "
                 f"(qm explain {job_id}: why it waits) ---")
    # Ctrl-C ends the follow between two reads, not inside one: a KeyboardInterrupt raised in
    # the middle of an HTTP request could leave the connection pool's lock held, and the
    # process hung on its way out (seen under load). A second Ctrl-C interrupts at once.
    with _ctrl_c_between_rounds() as stopped:
        while not stopped.wait(args.interval):
            if logs.follow_round():
                return _ended_status(api, job_id, args)
    logs.close()
    return 130


def _ended_status(api: Api, job_id: int, args: argparse.Namespace) -> int:
    """What a follow ends with once the job has ended: 0, or with --exit-with-job the job's own
    status, as srun's (services/exit_codes.followed_status; its code is read once, at the end)."""
    if not args.exit_with_job:
        return 0
    job = api.request("GET", f"jobs/{job_id}/")
    return exit_codes.followed_status(job["state"], job["exit_code"])


class _Logs:
    """One job's output as `qm logs` reads it: each rank's (`_RankOutput`), the run it follows
    (`generation`), and what qm says of them on standard error (`say`)."""

    def __init__(self, api: Api, job_id: int, args: argparse.Namespace, generation: int | None,
                 ranks: list[int]) -> None:
        self.api, self.job_id, self.args, self.generation = api, job_id, args, generation
        self.guarded = not args.raw and sys.stdout.isatty()
        self.outputs = {rank: _RankOutput(rank, prefixed=args.all_ranks, guarded=self.guarded) for rank in ranks}

    def read(self, params: dict[str, Any]) -> dict[str, Any]:
        return _read_logs(self.api, self.job_id, params)

    def say(self, words: str) -> None:
        if not self.args.json:
            sys.stdout.flush()
            output.note(words, out=sys.stderr)

    def show(self, rank: int, reply: dict[str, Any]) -> bool:
        self.outputs[rank].next_offset = reply["next_offset"]
        if self.args.json:
            if reply["text"] or not self.args.follow:
                output.emit_json_line(reply)
            return bool(reply["text"])
        if reply["notice"] and (reply["text"] or not self.args.follow):
            self.say(reply["notice"])
        self.outputs[rank].write(reply["text"])
        return bool(reply["text"])

    def drain(self, rank: int, reply: dict[str, Any]) -> bool:
        """Show `reply` and what is stored after it now; whether any text came."""
        got = self.show(rank, reply)
        while reply["more"]:
            reply = self.read({"rank": rank, "generation": reply["generation"], "offset": reply["next_offset"]})
            got = self.show(rank, reply) or got
        return got

    def close(self) -> None:
        for out in self.outputs.values():
            out.close()
        sys.stdout.flush()

    def follow_round(self) -> bool:
        """One round of `--follow`: what each rank wrote since, a run that began or began again
        (followed from its first byte), a rank new since; whether the job has ended (a round
        that brought nothing more after its end: its last lines came with the exit, more than
        64 KiB a rank follow within a second, and are read here while they come)."""
        got = False
        latest: dict[str, Any] = {}
        for rank, out in list(self.outputs.items()):
            latest = self.read({"rank": rank, "generation": self.generation, "offset": out.next_offset})
            got = self.drain(rank, latest) or got
        sys.stdout.flush()
        if self.generation is None and latest["generation"] is not None:
            self.generation = latest["generation"]  # its first run began: what was read is its output
            self.say(f"--- job {self.job_id} started: {run_named(latest['generations'], self.generation)} ---")
        elif self.args.generation is None and latest["generations"] and latest["generations"][-1] != self.generation:
            self._runs_again(latest["generations"])
            return False
        if self.args.all_ranks:
            for rank in latest["ranks"]:
                if rank not in self.outputs:  # a rank that wrote its first bytes since
                    self.outputs[rank] = _RankOutput(rank, prefixed=True, guarded=self.guarded)
                    self.outputs[rank].next_offset = 0
        if latest["job_state"] in FINISHED_STATES and not got:
            self.close()
            self.say(f"--- job {self.job_id} {ended_words(latest['job_state'])} ---")
            return True
        return False

    def _runs_again(self, generations: list[int]) -> None:
        """The job runs again (requeued, preempted): follow the new run, its latest (the last of
        `generations`), from its first byte."""
        self.close()
        self.generation = generations[-1]
        self.say(f"--- job {self.job_id} runs again: {run_named(generations, self.generation)} ---")
        self.outputs = {rank: _RankOutput(rank, prefixed=self.args.all_ranks, guarded=self.guarded) for rank in self.outputs}
        for out in self.outputs.values():
            out.next_offset = 0


class _CtrlC:
    """Whether Ctrl-C was pressed. The handler only sets a flag (it takes no lock: one taken
    inside a handler can be the lock the interrupted code holds)."""

    def __init__(self) -> None:
        self.pressed = False

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, in short naps so a Ctrl-C ends it soon; whether it came. A
        reader gone from standard output (`| head`) ends it too (BrokenPipeError)."""
        until = time.monotonic() + seconds
        while not self.pressed and (left := until - time.monotonic()) > 0:
            output.pause(min(left, 0.05))
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
