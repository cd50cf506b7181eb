"""`qm list` (`squeue`): the jobs of the filters given, a page at a time, with where each waits."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from typing import Any

from controlplane.cli import account, arguments, output
from controlplane.cli.client import Api, UsageError
from controlplane.cli.jobs.gpus import gpus_cell
from controlplane.cli.jobs.states import ACTIVE_STATES
from controlplane.cli.loop_state import warn
from scheduler_core.sentences import counted

#: `qm list`'s (and `qm status`'s) API filters → its flags, as client.refusal names them.
LIST_FLAGS = {"state": "state", "team": "team", "node": "node", "ordering": "sort", "array_id": "array", "user": "user",
              "name_exact": "name", "project": "project", "priority_class": "priority", "pending_code": "reason",
              "limit": "limit", "offset": "offset"}


def _list_params(args: argparse.Namespace, api: Api) -> dict[str, Any]:
    params: dict[str, Any] = {"limit": args.limit}
    if args.offset:
        params["offset"] = args.offset
    if args.state:
        params["state"] = args.state
    elif not args.all:
        params["state"] = ACTIVE_STATES
    if args.team:
        params["team"] = args.team
    if args.node:
        params["node"] = args.node
    if args.sort:
        params["ordering"] = args.sort.replace(" ", "")
    if args.array:
        params["array_id"] = arguments.array_id(args.array)
    if args.mine and args.user:
        raise UsageError("give --mine or --user USER, not both")
    # --name: the whole name (?name_exact=), as squeue -n and qm cancel -n read it; ?name= is a part of it
    for flag, param in (("user", "user"), ("name", "name_exact"), ("project", "project"), ("priority", "priority_class"),
                        ("reason", "pending_code")):
        value = getattr(args, flag)
        if value is not None and not value.strip():
            raise UsageError(f"--{flag} is empty: give a {'reason code' if flag == 'reason' else flag}")
        if value is not None:
            params[param] = value.strip()
    if args.mine:
        params["user"] = account.my_username(api)
    return params


def _start_cell(job: dict[str, Any]) -> str:
    """When a waiting job is expected to start (its ETA, as `squeue --start` says): `in 2.0 h`,
    `passed` once the time is past (no cycle has run since), `-` without one."""
    eta = output.parse_time(job.get("eta")) if job["state"] == "pending" else None
    if eta is None:
        return "-"
    ahead = (eta - datetime.now(timezone.utc)).total_seconds()
    return f"in {output.human_distance(ahead)}" if ahead > 0 else "passed"


#: The upstream states in which a condition can never be met (services/dependencies/conditions.py's
#: never_met): an any-of job's alternative that ended so is no longer one it waits on.
_NEVER_MEETS = {"afterok": {"failed", "cancelled", "timed_out", "unschedulable"}, "afternotok": {"succeeded"}}


def position_cell(job: dict[str, Any]) -> int | str | None:
    """A job's place in the queue (POS): its number while it waits in line; `held` for a held job,
    which is out of the queue until released (the API still ranks it after every job in line, as
    `qm explain` says; the jobs page shows no number for it either); `after 12` for a job waiting
    for a dependency, which has no place in the queue at all (the engine gives it no position):
    the jobs it waits for, those whose condition is not met yet (`after 12 or 13` when any one
    will do, those that can still be met); none otherwise."""
    if job["state"] != "pending":
        return job["queue_position"]
    if job.get("hold"):
        return "held"
    if job.get("pending_code") == "WaitingForDependency":
        any_of = job.get("dependency_mode") == "any"
        upstream = [str(d["job"]) for d in job.get("dependencies") or () if d.get("satisfied_at") is None
                    and not (any_of and d.get("state") in _NEVER_MEETS.get(d["condition"], ()))]
        if upstream:
            return "after " + (" or " if any_of else ",").join(upstream)
    return job["queue_position"]


def cmd_list(api: Api, args: argparse.Namespace) -> int:
    """The jobs the filters pick (waiting and running by default), `--limit` of them (1,000 a
    request), with what the table's cells need said under it; or why there are none."""
    params = _list_params(args, api)
    page = api.listed("jobs/", params, want=params["limit"])
    if args.json:
        output.emit_json(page)
        return 0
    rows = [
        (j["id"], output.job_name(j), j["team"], output.job_state(j), gpus_cell(j), j["priority_class"], output.age(j["submitted_at"]),
         position_cell(j), _start_cell(j), j["pending_code"] if j["state"] == "pending" else "")
        for j in page["results"]
    ]
    if not rows:
        _say_none(api, args, page["count"])
        warn(page.get("loop"))  # none of these: the loop is down all the same
        return 0
    # PRIORITY is --wide's (squeue's default leaves it out too): with it a held job's
    # `pending (held by admin)` or a WaitingForDependency pushed the row past 80 columns.
    # A waiting reason's code (WaitingForReservation, InsufficientContiguousGpus) took the row
    # past 80 columns with the name already at its shortest: it is cut then, keeping 20 columns.
    output.table(rows, ["ID", "NAME", "TEAM", "STATE", "GPUS", "PRIORITY", "AGE", "POS", "START", "REASON"],
                 cut=["NAME", "REASON"], wide=["PRIORITY"], least={"REASON": 20})
    limited = {j["array_id"]: j["array_task_limit"] for j in page["results"] if j.get("array_task_limit")}
    for array_id, limit in limited.items():  # JobArrayTaskLimit in REASON: this is why
        output.note(f"Array {array_id} runs at most {counted(limit, 'task')} at a time.")
    if any(str(row[7]).startswith("after ") for row in rows):
        output.note("POS after N: waits for job N (its dependency) and is not in the queue until then; "
              "`qm explain ID` says for what.")
    if any("/" in str(row[4]) for row in rows):
        output.note("GPUS of an elastic job holding GPUs: held/asked (e.g. 16/8: asked 8, grown to 16).")
    if any(row[8] == "passed" for row in rows):
        output.note("START passed: the expected start has passed and no scheduling cycle has run since.")
    shown_to = args.offset + len(rows)
    if page["count"] > shown_to or args.offset:
        more = f"; --offset {shown_to} for the next" if page["count"] > shown_to else ""
        output.note(f"({args.offset + 1}–{shown_to} of {page['count']}{more})")
    # POS, START and REASON are the last cycle's word: a stalled loop's read as a healthy queue's.
    warn(page.get("loop"), "the positions, start times and reasons above")
    return 0


def _say_none(api: Api, args: argparse.Namespace, count: int) -> None:
    """Why the page has no job: a finance account sees none, the offset is past the list's end,
    or none matched."""
    if count == 0 and not args.offset and account.reads_no_jobs(api):
        output.note("Finance accounts see no jobs: jobs belong to teams. `qm showback` shows what they cost.")
    elif count and args.offset:
        # Past the last page: it said "No jobs pending or running" of a list that had some.
        last = max(0, count - args.limit)
        output.note(f"No jobs from --offset {args.offset}: the list has {counted(count, 'job')} "
              f"(--offset {last} for the last page).")
    else:
        output.note("No jobs" + ("" if args.all or args.state else " pending or running (use --all for finished ones)") + ".")
