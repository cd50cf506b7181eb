"""`qm maint`: maintenance windows, nodes out of service from a start to an end
(maintenance-windows/): add, list, show, edit, cancel."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta, timezone
from typing import Any

from controlplane.cli import arguments, output
from controlplane.cli.client import Api, UsageError
from controlplane.services.span_text import span_words
from scheduler_core.sentences import counted

#: The API's fields (maintenance-windows/) → `qm maint`'s flags, as client.refusal names them.
MAINT_FLAGS = {"nodes": "nodes", "pool": "pool", "start_at": "start", "end_at": "end", "duration_s": "duration",
               "reason": "reason", "node": "node"}


def maint_when(text: str, now: datetime, flag: str = "--start") -> datetime:
    """A window's start or end, as `qm maint --start/--end` take it: `now`, `+2h` or `now+2h`
    (that long from now, as Slurm's starttime=now+2hours), `10:30` (today, UTC), a date or an ISO
    time (UTC unless it gives an offset). A bare `2h` is refused: in two hours, or two hours ago?"""
    value = text.strip().lower()
    ahead = value.removeprefix("now").strip()
    if ahead.startswith("+"):
        try:
            return now + timedelta(seconds=output.parse_duration(ahead[1:]))
        except ValueError:
            raise UsageError(f"{flag}: '{text}' is not a time: use now, +2h (in two hours), 10:30 (today, UTC) or "
                           "2026-12-02T08:00 (UTC unless it gives an offset)") from None
    if value[:1].isdigit() and not any(c in value for c in ":-"):
        raise UsageError(f"{flag}: '{text}' is a length, not a time: say +{text.strip()} for that long from now")
    try:
        return output.parse_when(text, now)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def _utc_z(at: datetime) -> str:
    """An instant as the API takes it, with its zone: UTC with `Z` (maintenance-windows/ refuses a
    time without one; maint_when reads one typed without an offset as UTC)."""
    return at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _maint_body(args: argparse.Namespace, now: datetime) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.nodes is not None:
        body["nodes"] = [n.strip() for n in args.nodes.split(",") if n.strip()]
    if args.pool is not None:
        body["pool"] = args.pool
    if args.start is not None:
        body["start_at"] = _utc_z(maint_when(args.start, now))
    if args.duration is not None:
        body["duration_s"] = arguments.duration(args.duration, "--duration")
    if args.end is not None:
        body["end_at"] = _utc_z(maint_when(args.end, now, "--end"))
    if args.reason is not None:
        body["reason"] = args.reason
    return body


def _window_times(window: dict[str, Any]) -> str:
    """From when to when, and how long whole as typed (`1 d 2 h 30 min`, as the window's own
    sentences say it; two units cut, "1d2h", dropped the half hour)."""
    return (f"from {output.utc_text(window['start_at'])} to {output.utc_text(window['end_at'])} "
            f"({span_words(window['duration_s'])})")


def _print_affected(window: dict[str, Any]) -> None:
    jobs = window["affected_running_jobs"]
    if window["state"] in ("ended", "cancelled"):
        return
    if window["state"] == "active":  # it has begun: whatever runs on its nodes runs inside it
        if not jobs:
            output.note("No job holds GPUs on its nodes now.")
            return
        output.note(f"{counted(len(jobs), 'running job')} hold{'s' if len(jobs) == 1 else ''} GPUs on its nodes now, "
              "inside the window, until the end of "
              f"{'its runtime limit' if len(jobs) == 1 else 'their runtime limits'} at the latest (the scheduler "
              "stops none: cancel or requeue them to free the nodes):")
    elif not jobs:
        output.note("No running job will still hold GPUs on its nodes when it begins.")
        return
    else:
        output.note(f"{counted(len(jobs), 'running job')} will still hold GPUs on its nodes when it begins, by "
              f"{'its runtime limit' if len(jobs) == 1 else 'their runtime limits'} (the scheduler stops none: drain "
              "the nodes or cancel the jobs):")
    output.table([(j["id"] if j["id"] is not None else "-", j["name"] or f"(a job of team {j['team']})", j["team"],
                   j["gpus"], ",".join(j["nodes"]), output.utc_text(j["holds_until"], suffix=""))
                  for j in jobs], ["JOB", "NAME", "TEAM", "GPUS", "NODES", "LIMIT ENDS (UTC)"], cut=["NAME"])


def _print_window(window: dict[str, Any], verb: str) -> None:
    output.note(f"Maintenance window {window['id']} {verb}: {output.nodes_cell(window['nodes'])} "
                         f"{_window_times(window)}: {window['reason']}.")
    _print_affected(window)


def _overlaps_said(others: list[int]) -> str:
    """`overlaps window 5 on a shared node ...`: windows stored before overlaps were refused."""
    ids = ", ".join(str(o) for o in others)
    return (f"overlaps window{'s' if len(others) > 1 else ''} {ids} on a shared node (stored before overlapping "
            f"windows were refused): merge them, `qm maint edit` one and `qm maint cancel` the other")


def _window_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"'{text}' is not a maintenance window's id: `qm maint list` shows them") from None


def cmd_maint(api: Api, args: argparse.Namespace) -> int:
    """`qm maint add|list|show|edit|cancel`: maintenance windows (maintenance-windows/)."""
    action = args.maint_action
    now = datetime.now(timezone.utc)
    if action == "list":
        params: dict[str, Any] = {}
        if not args.all:
            params["state"] = ["active", "upcoming"]
        if args.node:
            params["node"] = args.node
        # Every page: one (1,000 windows) was printed as the whole list, the latest windows missing.
        page = api.listed("maintenance-windows/", params)
        if args.json:
            output.emit_json(page)
            return 0
        rows = page["results"]
        if not rows:
            output.note("No maintenance window " + ("at all." if args.all else "active or upcoming (--all lists the "
                                              "ended and cancelled ones too).")
                  + " Schedule one: qm maint add --nodes NODE --start +2h --duration 4h --reason '...'")
            return 0
        output.table([(w["id"], w["state"], output.utc_text(w["start_at"], suffix=""),
                       output.utc_text(w["end_at"], suffix=""), span_words(w["duration_s"]),
                       output.nodes_cell(w["nodes"]), len(w["affected_running_jobs"]), w["reason"]) for w in rows],
                     ["ID", "STATE", "START (UTC)", "END (UTC)", "LENGTH", "NODES", "AFFECTED JOBS", "REASON"],
                     cut=["REASON"])
        for w in rows:
            if w.get("overlapping_windows"):
                output.note(f"Window {w['id']} {_overlaps_said(w['overlapping_windows'])}.")
        return 0
    if action == "add":
        body = _maint_body(args, now)
        window = api.request("POST", "maintenance-windows/", body=body)  # a 400: main names the flags
        if args.json:
            output.emit_json(window)
        else:
            _print_window(window, "scheduled")
            waits = ("No job starts on its nodes until it ends (jobs that could only run there wait, reason "
                     "MaintenanceWindow)." if window.get("state") == "active" else
                     "Jobs that would still run on its nodes when it begins wait (reason MaintenanceWindow).")
            output.note(f"{waits} Cancel it: qm maint cancel {window['id']}")
        return 0
    window_id = _window_id(args.window)
    if action == "show":
        window = api.request("GET", f"maintenance-windows/{window_id}/")
        if args.json:
            output.emit_json(window)
            return 0
        output.fields([("Window", window["id"]), ("State", window["state"]), ("Nodes", ", ".join(window["nodes"])),
                       ("Start", output.utc_text(window["start_at"])), ("End", output.utc_text(window["end_at"])),
                       ("Length", span_words(window["duration_s"])), ("Reason", window["reason"]),
                       ("Created", f"{output.utc_text(window['created_at'])} by {window['created_by'] or '-'}")]
                      + ([("Cancelled", f"{output.utc_text(window['cancelled_at'])} by "
                                        f"{window['cancelled_by'] or '-'}")] if window["cancelled_at"] else [])
                      + ([("Overlaps", _overlaps_said(window["overlapping_windows"]))]
                         if window.get("overlapping_windows") else []))
        _print_affected(window)
        return 0
    if action == "edit":
        body = _maint_body(args, now)
        if not body:
            raise UsageError(f"Nothing to change: give --nodes, --pool, --start, --end or --duration, or --reason "
                           f"(qm maint edit {window_id} --help).")
        window = api.request("PATCH", f"maintenance-windows/{window_id}/", body=body)
        if args.json:
            output.emit_json(window)
        else:
            _print_window(window, "now")
        return 0
    window = api.request("POST", f"maintenance-windows/{window_id}/cancel/")
    if args.json:
        output.emit_json(window)
    else:
        output.note(f"Maintenance window {window['id']} cancelled ({output.nodes_cell(window['nodes'])} "
                             f"{_window_times(window)}: {window['reason']}): its nodes take any work again from the "
                             "next scheduling cycle.")
    return 0
