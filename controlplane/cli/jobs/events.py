"""`qm events JOB [--follow]`: a job's history, oldest first, followed until the job ends."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from controlplane.cli import arguments, output
from controlplane.cli.client import LARGEST_PAGE, Api, CliError
from controlplane.cli.jobs.states import FINISHED_STATES, ended_words


def _event_line(event: dict[str, Any]) -> tuple[str, str, str, str]:
    return (output.utc_text(event["created_at"], suffix=""), event["kind"], event["actor"], event["message"])


def _print_streamed(cells: Sequence[str]) -> None:
    """One line of `events --follow`: columns of fixed width, since later lines cannot widen
    the ones already printed."""
    time_, kind, actor, what = (output.visible(c) for c in cells)
    print(f"{time_:<19}  {kind:<20}  {actor:<18}  {what}".rstrip(), flush=True)


def _events_after(api: Api, job_id: int, seen: set[int], start: int) -> list[dict[str, Any]]:
    """The job's events from position `start` on (oldest first), those not yet in `seen`."""
    return [e for page in api.pages(f"jobs/{job_id}/events/", {"limit": LARGEST_PAGE, "offset": start})
            for e in page["results"] if e["id"] not in seen]


def cmd_events(api: Api, args: argparse.Namespace) -> int:
    """A job's history, oldest first: each state change with who did it and why (a preemption
    names the job it made room for and what was lost). `--follow` keeps printing new events
    until the job has finished."""
    job_id = arguments.job_id(args.job)
    if not 0 < args.interval <= 3600:  # NaN fails too; no wait can be `inf`
        raise CliError(f"--interval {args.interval}: give a number of seconds above 0, at most 3600")
    seen: set[int] = set()
    events = _events_after(api, job_id, seen, 0)
    if args.json and not args.follow:
        output.emit_json(events)
        return 0
    headers = ["TIME (UTC)", "EVENT", "BY", "WHAT"]
    if args.json:
        for event in events:
            output.emit_json_line(event)
    elif args.follow:
        _print_streamed(headers)
        for event in events:
            _print_streamed(_event_line(event))
    elif events:
        output.table([_event_line(e) for e in events], headers)
    else:
        print(f"Job {job_id} has no events.")
    seen.update(e["id"] for e in events)
    if args.follow:
        _follow(api, args, job_id, seen)
    return 0


def _follow(api: Api, args: argparse.Namespace, job_id: int, seen: set[int]) -> None:
    """`--follow`: the events new since, each `args.interval` seconds, until the job has
    ended (then said, with its exit code)."""
    while True:
        job = api.request("GET", f"jobs/{job_id}/")
        # Events committed out of order land a little before the end: look back a few.
        fresh = _events_after(api, job_id, seen, max(0, len(seen) - 20))
        for event in fresh:
            if args.json:
                output.emit_json_line(event)
            else:
                _print_streamed(_event_line(event))
        seen.update(e["id"] for e in fresh)
        sys.stdout.flush()
        if job["state"] in FINISHED_STATES:
            if not args.json:
                code = f", exit code {job['exit_code']}" if job["exit_code"] is not None else ""
                print(output.visible(f"Job {job_id} ({job['name']}) {ended_words(job['state'])}{code}."))
            return
        output.pause(args.interval)  # ends at once should the reader go (`| head -3`)
