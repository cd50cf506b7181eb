"""What jobs held and what it cost: `qm history` (`sacct`: the jobs that ended in a window, their
GPU-hours and the work lost) and `qm showback` (cost and GPU-hours allocated, active and
productive by team, project, job or class)."""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import sys
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from controlplane.cli import account, output
from controlplane.cli.client import LARGEST_PAGE, Api, ApiError, CliError, UsageError
from controlplane.cli.jobs.states import states_given
from controlplane.services.history_text import (
    ended_waiting_after_requeue,
    ended_waiting_again,
    gpus_held_text,
)
from scheduler_core.sentences import counted, gpu_hours

# ---------------------------------------------------------------------------------- history

#: The states a job can end in: what `qm history` lists (pending and running jobs: `qm list`).
ENDED_STATES = ["succeeded", "failed", "cancelled", "timed_out"]
HISTORY_COLUMNS = ["JOBID", "NAME", "TEAM", "USER", "STATE", "EXIT", "START (UTC)", "ELAPSED", "GPUS", "GPU-H",
                   "LOST-GPU-H", "COST $", "NODES"]
#: Left out of the narrow view (a terminal without --wide), which fits 80 columns as sacct's default
#: does: who, when and where are the filters' (--user, --node) and the totals line's.
HISTORY_WIDE = ["USER", "START (UTC)", "LOST-GPU-H", "NODES"]


def ended_states_given(text: str) -> list[str]:
    """`qm history --state`: ways of ending as sacct -s takes them (comma-separated, any case,
    Slurm's CD, F, CA, TO too); a state no job ends in is refused with the ones there are."""
    states = states_given(text)
    wrong = [state for state in states if state not in ENDED_STATES]
    if wrong:
        raise argparse.ArgumentTypeError(
            f"'{wrong[0]}' is not a way a job ends: give {', '.join(ENDED_STATES[:-1])} or {ENDED_STATES[-1]} "
            "(Slurm's CD, F, CA, TO); pending and running jobs: qm list")
    return states


#: `qm history`'s API filters → its flags, as client.refusal names them.
HISTORY_FLAGS = {"state": "state", "finished_after": "since", "finished_before": "until", "user": "user", "team": "team",
                 "ran_on": "node", "name": "name", "exit_code": "exit_code"}


def _when(text: str, flag: str, now: datetime) -> datetime:
    try:
        return output.parse_when(text, now)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from exc


def _history_window(args: argparse.Namespace, now: datetime) -> tuple[datetime, datetime]:
    """[since, until): by default from 00:00 UTC today (sacct's default start) to now."""
    since = _when(args.since, "--since", now) if args.since else _when("today", "--since", now)
    until = _when(args.until, "--until", now) if args.until else now
    if until <= since and not args.until:
        raise UsageError(f"--since {output.utc_text(since.isoformat())} is not in the past (it is "
                       f"{output.utc_text(now.isoformat())}): nothing can have ended since")
    if until <= since:
        raise UsageError(f"--until {output.utc_text(until.isoformat())} is not after --since "
                       f"{output.utc_text(since.isoformat())}: give a window that ends after it starts")
    return since, until


def _history_jobs(api: Api, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every job of the window, page by page (1,000 a request), oldest end first. The window's
    end is fixed before the first page, so a job ending meanwhile cannot shift the pages."""
    return [job for page in api.pages("jobs/", {**params, "limit": LARGEST_PAGE, "offset": 0})
            for job in page["results"]]


def _gpus_held(job: dict[str, Any]) -> str:
    """GPUS: what its latest run held (`last_run_gpus`, the run ELAPSED measures), said as the
    history page says it; empty for a job that never held any."""
    return gpus_held_text(job.get("last_run_gpus"), job["gpus"], none="")


def _dollars(cents: str) -> str:
    """A CSV's cost_usd cell ("1234.50") as the table says it: 1,234.50."""
    return f"{Decimal(cents):,.2f}" if cents else ""


def _history_row(job: dict[str, Any], cost: str) -> list[Any]:
    return [
        job["id"], output.job_name(job), job["team"], job["submitter"] or "", output.job_state(job),
        "" if job["exit_code"] is None else job["exit_code"], output.utc_text(job["started_at"], suffix=""),
        output.clock(job["elapsed_s"]) if job.get("elapsed_s") is not None else "",
        _gpus_held(job), gpu_hours(job["gpu_hours"], cell=True), gpu_hours(job["lost_gpu_hours"], cell=True),
        _dollars(cost), output.nodes_cell(job.get("ran_on") or []),
    ]


def _history_costs(api: Api, params: dict[str, Any]) -> tuple[dict[int, str], str]:
    """What each job of the window cost and what they all did (the TOTAL row), to the cent, read
    from the server's history CSV for the same filters (`GET jobs/history.csv`): the very figures
    of the history page and its Download CSV, one writer (services/job_history.history_csv)."""
    rows = list(csv.reader(io.StringIO(api.request("GET", "jobs/history.csv", params=params, raw=True))))
    at = rows[0].index("cost_usd")
    costs = {int(row[0]): row[at] for row in rows[1:] if row and row[0] != "TOTAL"}
    total = next((row[at] for row in rows[1:] if row and row[0] == "TOTAL"), "0.00")
    return costs, total


def _history_totals(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    states: dict[str, int] = {}
    for job in jobs:
        states[job["state"]] = states.get(job["state"], 0) + 1
    return {"jobs": len(jobs), "states": dict(sorted(states.items(), key=lambda kv: (-kv[1], kv[0]))),
            "gpu_hours": round(sum(j["gpu_hours"] for j in jobs), 4),
            "lost_gpu_hours": round(sum(j["lost_gpu_hours"] for j in jobs), 4)}


def save_workbook(api: Api, path: str, params: dict[str, Any], to: str) -> int:
    """`--xlsx FILE`: the server's Excel workbook (`GET path` as xlsx) saved to FILE, or under
    the server's own file name inside FILE when FILE is a folder; where it went on stdout."""
    headers: dict[str, str] = {}
    data = api.request("GET", path, params=params, binary=True, response_headers=headers)
    named = re.search(r'filename="([^"/\\]+)"', headers.get("content-disposition", ""))
    target = os.path.join(to, named.group(1) if named else os.path.basename(path)) if os.path.isdir(to) else to
    try:
        with open(target, "wb") as file:
            file.write(data)
    except OSError as exc:
        raise CliError(f"--xlsx: cannot write {output.visible(target)}: {exc.strerror or exc}") from exc
    print(f"Saved {target} ({len(data):,} bytes, an Excel workbook)")
    return 0


def cmd_history(api: Api, args: argparse.Namespace) -> int:
    """The jobs that ended in a window, as `sacct` lists them: how each ended (state, exit code),
    when it started and how long its last run took, its GPUs, the GPU-hours it held over all its
    runs and those its preemptions threw away, the nodes it ran on; then the totals. The CSV is
    the server's (`GET jobs/history.csv`, the history page's Download CSV), written as it comes."""
    now = datetime.now(timezone.utc)
    since, until = _history_window(args, now)
    fmt = "json" if args.json else args.format
    if args.xlsx is not None and (args.json or args.format != "table"):
        raise UsageError(f"give --xlsx FILE or --{'json' if args.json else 'format ' + args.format}, not both")
    params: dict[str, Any] = {
        "state": args.state or ENDED_STATES, "finished_after": since.isoformat(),
        "finished_before": until.isoformat(),
    }
    for flag, field in (("user", "user"), ("team", "team"), ("node", "ran_on"), ("name", "name"),
                        ("exit_code", "exit_code")):
        if getattr(args, flag) is not None:
            params[field] = getattr(args, flag)
    if args.xlsx is not None:
        # The CSV's rows as a workbook, from the server (GET jobs/history.xlsx, the page's link).
        return save_workbook(api, "jobs/history.xlsx", params, args.xlsx)
    if fmt == "csv":
        # Byte for byte what the page and the API give for these filters: one writer, the server's.
        text = api.request("GET", "jobs/history.csv", params=params, raw=True)
        raw = getattr(sys.stdout, "buffer", None)  # the bytes as sent, whatever the locale's encoding
        if raw is None:
            sys.stdout.write(text)
            return 0
        sys.stdout.flush()
        raw.write(text.encode("utf-8"))
        raw.flush()
        return 0
    jobs = _history_jobs(api, {**params, "ordering": "finished_at"})
    costs, total_cost = _history_costs(api, params)
    totals = {**_history_totals(jobs), "cost_usd": total_cost}
    if fmt == "json":
        output.emit_json({"since": since.isoformat(), "until": until.isoformat(), "totals": totals, "jobs": jobs})
        return 0
    window = f"{output.utc_text(since.isoformat(), suffix='')} → {output.utc_text(until.isoformat())}"
    if not jobs:
        if account.reads_no_jobs(api):
            output.note("Finance accounts see no jobs: jobs belong to teams. `qm showback` shows what they cost.")
            return 0
        # With filters, "No job ended" was false whenever others had ended (qm history --state failed
        # on a day of 240 succeeded jobs): the filters are named, as the history page says them.
        chosen = ([f"--state {','.join(args.state)}"] if args.state else []) + [
            f"--{flag.replace('_', '-')} {getattr(args, flag)}"
            for flag in ("user", "team", "node", "name", "exit_code") if getattr(args, flag) is not None]
        output.note(("No job ended " if not chosen else f"No job matching {' '.join(chosen)} ended ") + window
              + ("" if args.since else " (since 00:00 UTC today; --since for earlier)")
              + ". Pending and running jobs: qm list.")
        return 0
    output.table([_history_row(job, costs.get(job["id"], "")) for job in jobs], HISTORY_COLUMNS, cut=["NAME"],
                 wide=HISTORY_WIDE)
    waiting_again = [job["id"] for job in jobs if ended_waiting_again(job["started_at"], job.get("last_run_gpus"))]
    if waiting_again:
        output.note(ended_waiting_after_requeue(waiting_again))
    ended = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in totals["states"].items())
    output.note(f"{counted(totals['jobs'], 'job')} ended {window}: {ended}; {gpu_hours(totals['gpu_hours'])} GPU-hours held, "
        f"{gpu_hours(totals['lost_gpu_hours'])} GPU-hours of work lost to preemptions and requeues; "
        f"cost ${_dollars(total_cost)}.")
    return 0


# --------------------------------------------------------------------------------- showback


IDLE_ENTRY = "__idle__"
#: The project part of a `team/project` group for a team's jobs that named no project (OpenCost's word).
NO_PROJECT = "__unallocated__"
#: The page's table, column for column but the lost GPU-hours beside the waste (until 6 Dec qm
#: left out $ / productive GPU-h and the useful tokens: a price per token no one could check).
SHOWBACK_COLUMNS = [
    ("GPU-H ALLOC", "gpuHours"), ("GPU-H BORROWED", "borrowedGpuHours"), ("GPU-H ACTIVE", "gpuHoursActive"), ("GPU-H PRODUCTIVE", "gpuHoursProductive"),
    ("COST $", "totalCost"), ("$/GPU-H", "usdPerGpuHour"), ("$/PRODUCTIVE GPU-H", "usdPerProductiveGpuHour"),
    ("USEFUL TOKENS", "usefulTokens"), ("$/1M TOKENS", "usdPerMillionTokens"),
    ("COST W/O TOKENS $", "costWithoutTokens"),
    ("IDLE RESERVED $", "idleReservedCost"), ("PREEMPTION WASTE $", "preemptionWasteCost"),
]
#: The narrow view (a terminal without --wide) keeps finance's money and GPU-hour columns, some
#: headed short so that it fits 80 columns (the figures as the wide view's); the efficiency and
#: token columns are --wide's.
SHOWBACK_WIDE = ["GPU-H ACTIVE", "GPU-H PRODUCTIVE", "$/PRODUCTIVE GPU-H", "USEFUL TOKENS", "$/1M TOKENS",
                 "COST W/O TOKENS $"]
SHOWBACK_SHORT = {"GPU-H ALLOC": "GPU-H", "GPU-H BORROWED": "BORROWED", "IDLE RESERVED $": "IDLE RSV $", "PREEMPTION WASTE $": "WASTE $"}
#: The columns of a team's guarantee: shown by team only, as the page and the CSV show them.
TEAM_ONLY_KEYS = ("borrowedGpuHours", "idleReservedCost")
#: __idle__'s cells that say nothing of it: capacity no job held is no job's GPU-hours or tokens.
IDLE_BLANK = ("gpuHours", "gpuHoursActive", "gpuHoursProductive", "usefulTokens")
#: The columns the page shows rounded (GPU-hours to two places, adding up to TOTAL; per-unit prices
#: to the cent, rounded once): printed as the API's `shown` gives them (services/showback.shown_figures,
#: the page's figures), never rounded here again. Until 7 Dec qm rounded the API's four places to
#: two, and 1.01495 GPU-hours read 1.01 on the page and 1.02 here, in the row and in TOTAL.
SHOWN_KEYS = ("gpuHours", "borrowedGpuHours", "gpuHoursActive", "gpuHoursProductive", "usdPerGpuHour",
              "usdPerProductiveGpuHour")
#: The GPU-hour columns: a non-zero figure below a hundredth reads "< 0.01", as on the page.
HOUR_KEYS = ("gpuHours", "borrowedGpuHours", "gpuHoursActive", "gpuHoursProductive")


def _kind(name: str, allocation: dict[str, Any]) -> str:
    """What an allocation is, as the API's `kind` says (group, idle or total): a team stored as
    `__idle__` before the name was refused is a group (keyed `__idle__ (team 7)`). A server from
    before `kind` (7 Dec) is read by the name, as it was."""
    return str(allocation.get("kind") or ("idle" if name == IDLE_ENTRY else "group"))


def _cell(allocation: dict[str, Any], key: str) -> str:
    """A showback cell: the figure the page shows where the API gives it (`shown`), else the
    allocation's own."""
    shown = allocation.get("shown") or {}
    value = shown.get(key, allocation.get(key)) if key in SHOWN_KEYS else allocation.get(key)
    if key in HOUR_KEYS and value and abs(value) < 0.01:
        return "< 0.01"  # a share rounded to none is given exact: said as the page says it
    return _money(value, key)


def _token_cents(allocation: dict[str, Any]) -> Decimal:
    """What the row's token-reporting jobs cost, in the API's cents: its cost less its cost
    without tokens (both whole cents, so the difference is exact as decimals)."""
    cost, without = allocation.get("totalCost"), allocation.get("costWithoutTokens")
    if cost is None or without is None:
        return Decimal(0)
    return Decimal(str(cost)) - Decimal(str(without))


def _money(value: Any, key: str) -> str:
    if value is None:
        return "-"
    if key == "usefulTokens":
        return f"{int(value):,}"  # whole tokens, as the page and the CSV count them
    if key == "usdPerMillionTokens":
        # Per million tokens, fixed-point with the CSV's six places: per token it printed
        # `5.42e-08`, a unit and a notation no other view of showback uses.
        return f"{value:,.6f}"
    if value and abs(value) < 0.005:
        # A minute of one GPU read "0.00" GPU-hours beside "$0.01"; a small non-zero figure is
        # said as such, as the sentences' table cells say it (scheduler_core.sentences).
        return "< 0.01"
    return f"{value:,.2f}"


#: The API's `month`: YYYY-MM, checked here first so that the refusal names the flag (the API's
#: names its parameter, `month`).
MONTH = re.compile(r"^[0-9]{4}-[0-9]{2}$")
#: `qm showback`'s API parameters → its flags, as client.refusal names them.
SHOWBACK_FLAGS = {"group_by": "by", "window": "window", "month": "month"}


def cmd_showback(api: Api, args: argparse.Namespace) -> int:
    if args.csv and args.json:
        # It printed the CSV under --json, which a script then failed to read as JSON.
        raise UsageError("give --json (the API's JSON) or --csv (finance's CSV), not both")
    if args.xlsx is not None and (args.csv or args.json):
        raise UsageError(f"give --xlsx FILE or --{'csv' if args.csv else 'json'}, not both")
    params: dict[str, Any] = {"group_by": args.by}
    if args.month is not None and not MONTH.match(args.month.strip()):
        raise UsageError(f"--month: '{output.visible(args.month)}' is not a month: use YYYY-MM, such as 2026-11")
    if args.month:
        params["month"] = args.month.strip()
    else:
        params["window"] = args.window
    if args.xlsx is not None:
        # The CSV's rows as a workbook (showback/?format=xlsx, the page's Download for Excel); a
        # refusal is the API's JSON, its fields named, so main names the flags.
        return save_workbook(api, "showback/", {**params, "format": "xlsx"}, args.xlsx)
    if args.csv:
        try:
            sys.stdout.write(api.request("GET", "showback/", params={**params, "format": "csv"}, raw=True))
        except ApiError as error:
            if error.status != 400:
                raise
            # A CSV refusal is one sentence in one cell, its fields unnamed: the JSON answer to the
            # same question names them, so main can name the flags (SHOWBACK_FLAGS).
            api.request("GET", "showback/", params=params)
            raise
        return 0
    report = api.request("GET", "showback/", params=params)
    if args.json:
        output.emit_json(report)
        return 0
    window = report.get("window", {})
    # The window's ends as every other qm command says a time (the raw ISO text before).
    output.note(f"Showback by {args.by}, {output.utc_text(window.get('start'), '')} → "
          f"{output.utc_text(window.get('end'))} ({report.get('currency', 'USD')})")
    allocations: dict[str, Any] = {}
    for chunk in report.get("data", []):
        allocations.update(chunk)
    # Job ids in numeric order (as text, job 100 came between 10 and 11).
    # The idle capacity after the groups, as on the page and in the CSV (among them by name, it
    # sat between a team TOTAL and a team __idle__ stored before such names were refused).
    ordered = sorted(allocations.items(), key=lambda item: (
        _kind(*item) == "idle", *((0, int(item[0]), "") if item[0].isascii() and item[0].isdigit() else (1, 0, item[0]))))
    # __idle__'s GPU-hours are capacity no job held (OpenCost's convention): not allocated hours,
    # so its GPU-hour cells stay empty and the columns add up to TOTAL; a line below says them.
    # A job row says whose job it is (its id alone sent finance to look each one up).
    named = ("job", "team", "project") if args.by == "job" else ()
    rows = [[name] + [str((a.get("properties") or {}).get(p) or "-") for p in named]
            + [("-" if _kind(name, a) == "idle" and key in IDLE_BLANK else _cell(a, key)) for _, key in SHOWBACK_COLUMNS]
            for name, a in ordered]
    totals = report.get("totals") or {}
    if totals:
        rows.append(["TOTAL"] + ["" for _ in named] + [_cell(totals, key) for _, key in SHOWBACK_COLUMNS])
    began = report.get("accountingBegan")
    # The period starts before the accounting began: nothing before was recorded (a month the
    # product joined halfway read as a fleet that cost nothing until then).
    not_recorded = (f"Not recorded before {output.utc_text(began)}, when the accounting began: these figures count "
                    "nothing before it (not $0.00 of use: no record).") if began else ""
    began_at, ended = output.parse_time(began), output.parse_time(window.get("end"))
    if began_at is not None and ended is not None and began_at >= ended:
        # The period ended before the accounting began: a table of 0.00 and a TOTAL of 0.00 (the
        # fleet readers' __idle__ row) read as a fleet that cost nothing; as the page, no figures.
        output.note(f"Nothing was recorded in this period: the accounting began at {output.utc_text(began)}, "
                             "after it ended (not $0.00 of use: no record).")
        return 0
    if not allocations:
        output.note("Nothing recorded in this window.")
        if not_recorded:
            output.note(not_recorded)
        return 0
    # Idle reserved quota and borrowed GPU-hours are a team's (its guarantee is): by project, job
    # or class the API has none (null), so the columns go, as on the page (until 7 Dec idle
    # reserved read "-" on every group and a figure on TOTAL).
    by_team = args.by == "team"
    shown = [i for i, (_, key) in enumerate(SHOWBACK_COLUMNS) if by_team or key not in TEAM_ONLY_KEYS]
    first = 1 + len(named)
    rows = [row[:first] + [row[first + i] for i in shown] for row in rows]
    headed = output.table(rows, [args.by.upper()] + [{"job": "NAME"}.get(p, p.upper()) for p in named]
                          + [SHOWBACK_COLUMNS[i][0] for i in shown], cut=["NAME", "PROJECT", "TEAM"], wide=SHOWBACK_WIDE,
                          short=SHOWBACK_SHORT, labels=[IDLE_ENTRY, "TOTAL"])
    for name in (n for n in allocations if n.lower() == "total"):
        # A team stored as TOTAL (before the name was refused) read as the total's twin.
        output.note(f"{name} above the last row is the {args.by.replace('_', ' ')} named {name}; "
                             "the last row is the report's total.")
    idle = next((a for name, a in allocations.items() if _kind(name, a) == "idle"), None)
    if idle and idle.get("gpuHours") is not None:
        output.note(f"{IDLE_ENTRY}: {_cell(idle, 'gpuHours')} GPU-hours of capacity no job held "
              f"(cost ${_money(idle.get('totalCost'), 'totalCost')}).")
    no_project = sorted(name for name, a in allocations.items() if name.endswith("/" + NO_PROJECT)
                        and (a.get("properties") or {}).get("project_id") is None)
    if no_project:
        # The row read `vision/__unallocated__` with nothing to say it is not a project of that
        # name (the page says "vision (no project)"; the table keeps the API's and CSV's name).
        output.note(f"{', '.join(no_project)}: the jobs of "
                             f"{'that team' if len(no_project) == 1 else 'those teams'} that named no project.")
    if idle and totals.get("usdPerGpuHour") is not None:
        # TOTAL's $/GPU-H (13.50 beside rows of 1.54 and 0.80 on the demo) said nothing of why.
        output.note("TOTAL's $/GPU-H is the fully loaded price: what the fleet cost, idle capacity included, per "
              "GPU-hour the jobs held.")
    unpriced_tokens = [(name, a) for name, a in [*ordered, ("TOTAL", totals)] if _kind(name, a) != "idle"
                       and a.get("usdPerMillionTokens") is None]
    # A row whose jobs report tokens but kept none here (a model still loading, tokens lost to a
    # preemption): that cost is in COST $ and not under COST W/O TOKENS $, so the note below
    # would send the reader to a 0.00 (finance walk, 8 Dec).
    not_kept = [(name, _token_cents(a)) for name, a in unpriced_tokens if _token_cents(a) > 0]
    no_tokens = [name for name, a in unpriced_tokens if _token_cents(a) <= 0 and a is not totals]
    if not_kept and "$/1M TOKENS" in headed:
        output.note("$/1M TOKENS '-' with less under COST W/O TOKENS $ than COST $: no useful tokens kept in this "
                    "period by jobs that report them (" + ", ".join(f"{name} ${cents:,.2f}" for name, cents in not_kept[:5])
                    + (f" and {len(not_kept) - 5} more" if len(not_kept) > 5 else "") + "): their tokens came after "
                    "it, or were lost to a preemption or failure since their last checkpoint.")
    if no_tokens and "$/1M TOKENS" in headed:
        # A '-' in $/1M TOKENS said nothing of why (the page explains it under its table): no
        # useful tokens were reported there, so there is no price per token, neither $0 nor
        # infinite, and that cost is under COST W/O TOKENS $.
        output.note(f"$/1M TOKENS '-': no useful tokens reported ({', '.join(no_tokens[:5])}"
            f"{f' and {len(no_tokens) - 5} more' if len(no_tokens) > 5 else ''}): no price per token; "
            "what they cost is under COST W/O TOKENS $.")
    if not_recorded:
        output.note(not_recorded)
    for u in report.get("unpriced") or []:
        # GPU time no price rate covered is counted at $0 in every figure above: say where.
        since = f"before its first rate ({output.utc_text(u['pricedFrom'])})" if u.get("pricedFrom") else "no rate at all"
        output.note(f"Not priced, counted at $0.00: {u['gpuType']} {u['capacityTier']} ({since}): "
                             f"{u['capacityGpuHours']:,.2f} GPU-hours of capacity, {u['allocatedGpuHours']:,.2f} "
                             "held by jobs. Add a price rate for it (admin).")
    if not by_team:
        output.note(f"Idle reserved quota is per team, not per {args.by.replace('_', ' ')}: not shown here "
              "(nor in the CSV); `qm showback --by team` shows it.")
    if totals.get("idleReservedCost") and "IDLE RESERVED $" in headed:
        # TOTAL's IDLE RESERVED $ sat beside its COST $ unexplained: finance added the two.
        output.note(f"{headed['IDLE RESERVED $']}: guarantees neither used nor lent, at the reserved rate; a reading of the idle "
              "capacity, not a charge: not in COST $ or TOTAL.")
    return 0
