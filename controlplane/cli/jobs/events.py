"""`qm events JOB [--follow]`: a job's history, oldest first, followed until the job ends; `qm
events` without a job: the fleet's events (the API's `events/`, which an admin reads whole and a
member for their teams), filtered by --since, --kind, --node and --team, the latest --limit of
them or --all, oldest first."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from controlplane.cli import arguments, output, terminal_width
from controlplane.cli.client import LARGEST_PAGE, Api, UsageError
from controlplane.cli.jobs.states import FINISHED_STATES, ended_words
from controlplane.services import exit_codes


def _event_line(event: dict[str, Any]) -> tuple[str, str, str, str]:
    return (output.utc_text(event["created_at"], suffix=""), event["kind"], event["actor"], event["message"])


#: A job's events: BY is `--wide`'s on a terminal (its sentence names whoever acted: "Cancelled
#: by alice"; the scheduler and the agents are plain from it), so WHAT has the room.
JOB_EVENT_COLUMNS = ["TIME (UTC)", "EVENT", "BY", "WHAT"]
#: The fleet's: NODE, TEAM and BY are `--wide`'s (a node's events and a job's bind and start name
#: the node in their sentence): at 80 columns WHAT had 17 to say it in, and was cut.
FLEET_EVENT_COLUMNS = ["TIME (UTC)", "EVENT", "JOB", "NODE", "TEAM", "BY", "WHAT"]
_FLEET_WIDE = ["NODE", "TEAM", "BY"]

#: `events --follow`'s fixed columns: the longest kind (`allocation.released`) and a usual actor.
_KIND_COLUMNS = 20
_ACTOR_COLUMNS = 18


def _print_streamed(cells: Sequence[str]) -> None:
    """One line of `events --follow`: columns of fixed width, since later lines cannot widen
    the ones already printed. On a terminal its narrow view, as `qm events JOB`'s table: TIME,
    EVENT and WHAT, wrapped between words under its column to the terminal's width."""
    time_, kind, actor, what = (output.visible(c) for c in cells)
    limit = terminal_width.columns()
    if limit is None:
        print(f"{time_:<19}  {kind:<{_KIND_COLUMNS}}  {actor:<{_ACTOR_COLUMNS}}  {what}".rstrip(), flush=True)
        return
    indent = 19 + 2 + _KIND_COLUMNS + 2
    lines = terminal_width.wrapped(what, max(limit - indent, terminal_width.SHORTEST), output.width)
    print(f"{time_:<19}  {kind:<{_KIND_COLUMNS}}  {lines[0]}".rstrip(), flush=True)
    for line in lines[1:]:
        print(" " * indent + line, flush=True)


def _events_after(api: Api, job_id: int, seen: set[int], start: int) -> list[dict[str, Any]]:
    """The job's events from position `start` on (oldest first), those not yet in `seen`."""
    return [e for page in api.pages(f"jobs/{job_id}/events/", {"limit": LARGEST_PAGE, "offset": start})
            for e in page["results"] if e["id"] not in seen]


#: `qm events`' API filters → its flags, as client.refusal names them.
EVENTS_FLAGS = {"after": "since", "kind": "kind", "node": "node", "team": "team", "limit": "limit"}

#: The flags that filter the fleet's events, not one job's.
_FLEET_FLAGS = ("since", "kind", "node", "team", "limit", "all")

#: The fleet's events shown without --limit or --all.
LATEST_SHOWN = 50


def _fleet_events(api: Api, args: argparse.Namespace) -> int:
    """The fleet's events the reader may see, under the flags' filters: the latest `--limit`
    (newest first from the API, printed oldest first as a log reads) or, with --all, every one,
    page by page (1,000 a request) up to the instant of the first request, so events written
    meanwhile do not shift the pages. A line says how many more matched."""
    if args.follow or args.exit_with_job:
        raise UsageError(f"--{'follow' if args.follow else 'exit-with-job'} watches one job: give its id (qm events JOB "
                       "--follow)")
    limit = LATEST_SHOWN if args.limit is None else args.limit
    now = datetime.now(timezone.utc)
    params: dict[str, Any] = {"before": now.isoformat()}
    if args.since:
        try:
            params["after"] = output.parse_when(args.since, now).isoformat()
        except ValueError as exc:
            raise UsageError(f"--since: {exc}") from exc
    kinds = [k.strip() for value in args.kind or [] for k in value.split(",") if k.strip()]
    if kinds:
        params["kind"] = kinds
    for flag in ("node", "team"):
        if getattr(args, flag) is not None:
            params[flag] = getattr(args, flag)
    # every one, or the latest `limit` (a larger one than a page was refused until 7 Dec)
    answer = api.listed("events/", params, want=None if args.all else limit)
    events = answer["results"][::-1]   # oldest first
    matched = int(answer.get("count") or 0)
    if args.json:
        output.emit_json(events)
        return 0
    if not events:
        output.note("No events match." if len(params) > 1 else "No events yet.")
        return 0
    output.table([(output.utc_text(e["created_at"], suffix=""), e["kind"], e["job"] or "-", e["node"] or "-",
                   e["team"] or "-", e["actor"], e["message"]) for e in events],
                 FLEET_EVENT_COLUMNS, wrap=["WHAT"], wide=_FLEET_WIDE, least={"WHAT": 30})
    if matched > len(events):
        output.note(f"The latest {len(events):,} of {matched:,} events; --limit N or --all for more.")
    return 0


def cmd_events(api: Api, args: argparse.Namespace) -> int:
    """A job's history, oldest first: each state change with who did it and why (a preemption
    names the job it made room for and what was lost). `--follow` keeps printing new events
    until the job has finished. Without a job: the fleet's events (`_fleet_events`)."""
    if args.job is None:
        return _fleet_events(api, args)
    given = [f"--{flag}" for flag in _FLEET_FLAGS if getattr(args, flag) not in (None, False, [])]
    if given:
        raise UsageError(f"{', '.join(given)} filter the fleet's events: give no job id (qm events JOB lists all of "
                       "one job's)")
    job_id = arguments.job_id(args.job)
    if not 0 < args.interval <= 3600:  # NaN fails too; no wait can be `inf`
        raise UsageError(f"--interval {args.interval}: give a number of seconds above 0, at most 3600")
    if args.exit_with_job and not args.follow:
        raise UsageError("--exit-with-job needs --follow: it exits as the job did once the job has ended")
    seen: set[int] = set()
    events = _events_after(api, job_id, seen, 0)
    if args.json and not args.follow:
        output.emit_json(events)
        return 0
    headers = JOB_EVENT_COLUMNS
    if args.json:
        for event in events:
            output.emit_json_line(event)
    elif args.follow:
        _print_streamed(headers)
        for event in events:
            _print_streamed(_event_line(event))
    elif events:
        output.table([_event_line(e) for e in events], headers, wrap=["WHAT"], wide=["BY"], least={"WHAT": 30})
    else:
        output.note(f"Job {job_id} has no events.")
    seen.update(e["id"] for e in events)
    if args.follow:
        return _follow(api, args, job_id, seen)
    return 0


def _follow(api: Api, args: argparse.Namespace, job_id: int, seen: set[int]) -> int:
    """`--follow`: the events new since, each `args.interval` seconds, until the job has
    ended (then said, with its exit code); 0, or with --exit-with-job the job's own status, as
    srun's (services/exit_codes.followed_status)."""
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
                output.note(f"Job {job_id} ({job['name']}) {ended_words(job['state'])}{code}.")
            return exit_codes.followed_status(job["state"], job["exit_code"]) if args.exit_with_job else 0
        output.pause(args.interval)  # ends at once should the reader go (`| head -3`)
