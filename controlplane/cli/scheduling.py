"""What decides which waiting job starts next: `qm sprio` (the queue's order), `qm sshare` (the
teams' fair shares), `qm config` (the policy in force) and `qm quotas` (the teams' quotas)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from controlplane.cli import arguments, output, terminal_width
from controlplane.cli.client import LARGEST_PAGE, Api, ApiError, refusal
from controlplane.cli.loop_state import warn
from controlplane.services import quota_text
from controlplane.services.queue_rank_text import (
    order_cell,
    order_cell_note,
    rank_in_line,
    ranks_in_line_never,
)
from controlplane.services.span_text import span_words
from scheduler_core.sentences import counted, gpu_hours

#: How each queue-order plugin sorts, in the words `qm sprio` heads its table with.
QUEUE_ORDER_WORDS = {
    "priority_fair_share": "higher PRIORITY first (the class's value + AGE, the points waiting added); among equals "
                           "the lower team SHARE, then the shorter LIMIT, then the earlier submission",
    "priority_fifo": "higher PRIORITY first (the class's value + AGE); among equals the earlier submission",
    "fifo": "submission order alone",
}


#: The jobs `qm sprio` shows unless told (--limit N, --all): Slurm's sprio prints every one, which
#: on a queue of 5,000 was a megabyte of JSON and 5,000 lines (bench/scale_audit.py).
SPRIO_SHOWN = 50


def cmd_sprio(api: Api, args: argparse.Namespace) -> int:
    """Slurm's sprio: the waiting jobs you may see in queue order, with what places each there,
    the first `--limit` (50) of them unless `--all` (or jobs asked for by id: every one of them).
    A job asked for that is not in line says what it is instead; one that does not exist, or is
    not yours to see, is an error (exit 1), as `qm status` says it."""
    ids = list(dict.fromkeys(arguments.job_id(j) for j in args.jobs))
    params: dict[str, Any] = {"job": ",".join(map(str, ids))} if ids else {}
    if args.team:
        params["team"] = args.team
    try:
        body = _queue(api, params, None if args.all or ids else args.limit)
    except ApiError as error:
        raise refusal(error, args, {"team": "team", "limit": "limit"}) from None
    # The API answers only the jobs in line among those asked: a typo, or another team's job,
    # read as "None of those jobs is in line" and exit 0. Each of the others is looked up.
    listed = {r["job"] for r in body["jobs"]}
    waiting_out: list[dict[str, Any]] = []
    unknown: list[ApiError] = []
    for job_id in ids:
        if job_id in listed:
            continue
        try:
            waiting_out.append(api.request("GET", f"jobs/{job_id}/"))
        except ApiError as error:
            if error.status != 404:
                raise
            unknown.append(error)  # "No job 99, or not yours to see."
    if args.json:
        output.emit_json(body)
    elif not ids or len(unknown) < len(ids):
        _print_queue(body, asked=bool(ids), team=args.team)
        for job in waiting_out:
            output.note(f"Job {job['id']} ({job['name']}) is {_state_said(job)}; not in line.")
        # ORDER is the next cycle's: with the loop stalled, that cycle is not coming.
        warn(body.get("loop"))
    for error in unknown:
        print(f"error: {output.visible(str(error))}", file=sys.stderr)
    return 1 if unknown else 0


def _queue(api: Api, params: dict[str, Any], limit: int | None) -> dict[str, Any]:
    """The API's answer for the first `limit` jobs in line (one request, up to its largest page),
    or, `limit` None, every one of them in one answer: pages of LARGEST_PAGE read one after the
    other (each the order as it stands when read: a job is listed once, at its first place)."""
    if limit is not None and limit <= LARGEST_PAGE:
        return api.request("GET", "jobs/priority/", params={**params, "limit": limit})  # type: ignore[no-any-return]
    body: dict[str, Any] | None = None
    jobs: dict[int, dict[str, Any]] = {}
    offset = 0
    while True:
        page = api.request("GET", "jobs/priority/", params={**params, "limit": LARGEST_PAGE, "offset": offset})
        body = body or page
        for row in page["jobs"]:
            jobs.setdefault(row["job"], row)
        offset += len(page["jobs"])
        if not page["next"] or not page["jobs"] or (limit is not None and len(jobs) >= limit):
            break
    rows = list(jobs.values())[:limit] if limit is not None else list(jobs.values())
    return {**body, "count": max(body["count"], len(rows)), "next": None, "previous": None, "jobs": rows}


def _state_said(job: dict[str, Any]) -> str:
    """`pending (held)`, `pending: WaitingForDependency`, `running`: why a job is not in line."""
    if job["state"] == "pending" and not job.get("hold") and job.get("pending_code"):
        return f"pending: {job['pending_code']}"
    return output.job_state(job)


def _print_queue(body: dict[str, Any], asked: bool, team: str | None = None) -> None:
    output.note(f"Queue order ({body['queue_order']}): {QUEUE_ORDER_WORDS.get(body['queue_order'], body['queue_order'])}.")
    if not body["jobs"]:
        whose = f"team {team}'s" if team else "yours"
        output.note(("None of those jobs is" if asked else f"No job of {whose} is") + " in line"
              + f" ({counted(body['in_line'], 'job')} in line in all; held jobs and jobs waiting for a dependency "
                "are not in line).")
        return
    # A job that can never run as asked is ranked by priority alone: its ORDER is marked and a
    # footnote says so, in the words of its page and `qm explain` (as Slurm's sinfo marks a cell `*`),
    # and why, as the engine said it.
    never = [r for r in body["jobs"] if r.get("can_run") is False]
    output.table(
        [(order_cell(r["order"], can_run=r.get("can_run") is not False, never_ahead=r.get("never_ahead", 0)), r["job"], output.job_name(r), r["team"], r["priority_class"], f"{r['effective_priority']:g}",
          f"{r['class_value']:g}", f"{r['aging_points']:g}", f"{r['team_share']:.3f}",
          span_words(r["runtime_limit_s"]) if r["runtime_limit_s"] else "-") for r in body["jobs"]],
        ["ORDER", "ID", "NAME", "TEAM", "CLASS", "PRIORITY", "= CLASS", "+ AGE", "SHARE", "LIMIT"], cut=["NAME"],
        # The narrow view fits 80 columns (team language, class best-effort made it 85 with the name
        # cut): the CLASS named says its value, PRIORITY is it plus AGE.
        wide=["= CLASS"], short={"+ AGE": "AGE"},
    )
    for line in _never_footnotes(never, body["in_line"]):
        output.note(line)
    # A job that can start behind such jobs: its place among the jobs that can start, as its page
    # and `qm explain` say it, beside its rank ("7 (5)"); said once whether or not those are listed.
    if any(r.get("can_run") is not False and r.get("never_ahead") for r in body["jobs"]):
        output.note(order_cell_note())
    more = body["count"] - len(body["jobs"])
    if more > 0:
        output.note(f"The first {len(body['jobs']):,} of {body['count']:,}{f' of team {team}' if team else ''}; {more:,} "
              f"more (--limit N for the first N, --all for every one).")
    output.note(f"{counted(body['in_line'], 'job')} in line in all; ORDER is the next cycle's.")


def _never_footnotes(never: list[dict[str, Any]], in_line: int) -> list[str]:
    """The footnote of the jobs that can never run as asked: a line per job, but one per array and
    reason for its tasks (in the order they first appear), naming how many, which and their ranks;
    each line ends with why, in the engine's sentence as the last cycle stored it (the row's
    `reason`, `qm explain`'s): an array of 50 such tasks had 50 lines, one a task, and no line said why."""
    groups: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for r in never:
        who = r["array_id"] if r.get("array_id") else f"job {r['job']}"
        groups.setdefault((who, r.get("reason")), []).append(r)
    lines = []
    for (_, reason), rows in groups.items():
        why = f" {reason}" if reason else ""
        if len(rows) == 1:
            lines.append(f"* Job {rows[0]['job']}: {rank_in_line(rows[0]['order'], in_line, can_run=False)}.{why}")
            continue
        indices = output.number_ranges(r["array_index"] for r in rows)
        jobs = output.number_ranges(r["job"] for r in rows)
        ranks = output.number_ranges(r["order"] for r in rows)
        lines.append(f"* Tasks {indices} of array {rows[0]['name']} ({len(rows)} tasks, jobs {jobs}): "
                     f"{ranks_in_line_never(ranks, in_line)}.{why}")
    return lines


def cmd_sshare(api: Api, args: argparse.Namespace) -> int:
    """Slurm's sshare: every team's fair share, lowest first (the order the queue favours)."""
    body = api.request("GET", "scheduler/fair-share/")
    if args.json:
        output.emit_json(body)
        return 0
    output.table(
        [(r["team"], f"{r['dominant_share']:.3f}", r["dominant_resource"] or "-",
          f"{r['shares']['gpus']:.3f}", f"{r['shares']['cpus']:.3f}", f"{r['shares']['memory']:.3f}",
          r["held_now"]["gpus"], gpu_hours(r['decayed_usage']['gpu_hours'], cell=True)) for r in body["teams"]],
        ["TEAM", "SHARE", "OF", "GPU SHARE", "CPU SHARE", "MEM SHARE", "GPUS HELD", "GPU-H DECAYED"],
        # The narrow view fits 80 columns with a team named at length: SHARE and OF say the CPU or
        # memory share when it is the dominant one.
        wide=["CPU SHARE", "MEM SHARE"],
    )
    # the half-life as the teams page says it ("halved every 7.0 days"; it said "a 7d half-life")
    output.note(f"SHARE: the largest of a team's GPU, CPU and memory shares (held now + past usage decayed, "
          f"halved every {output.human_distance(body['half_life_s'])}, over the fleet); among jobs of equal "
          f"priority the team with the lower share goes first (qm sprio).")
    return 0


def cmd_config(api: Api, args: argparse.Namespace) -> int:
    """Slurm's `scontrol show config`: the scheduling policy in force, the loop's timings and
    the leader now."""
    body = api.request("GET", "scheduler/policy/")
    if args.json:
        output.emit_json(body)
        return 0

    def said(value: Any) -> str:
        if isinstance(value, dict):
            return ", ".join(f"{k}={said(v)}" for k, v in value.items())
        if isinstance(value, list):
            return ",".join(said(v) for v in value)
        return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)

    output.fields([(name, said(value)) for name, value in body["engine"].items()])
    print()
    output.fields([(name, said(value)) for name, value in body["loop"].items()])
    leader = body["leader"]
    print()
    if leader is None or not leader["holder"]:
        output.note("No scheduling cycle has run yet.")
    else:
        output.fields([("leader", f"{leader['holder']} (epoch {leader['epoch']})"),
                       ("last cycle", f"{output.utc_text(leader['last_cycle_at'])} "
                                      f"({leader['last_cycle_ms'] or 0:.0f} ms; {leader['cycles']} cycles)")])
    return 0


# ----------------------------------------------------------------------------------- quotas


def cmd_quotas(api: Api, args: argparse.Namespace) -> int:
    """Your team's quotas (admins and finance: every team's) with what each holds now."""
    params: dict[str, Any] = {}
    if args.team:
        params["team"] = args.team
    # Every page: one (1,000 quotas) was printed as the whole list, the last teams' missing.
    page = api.listed("quotas/", params)
    if args.json:
        output.emit_json(page)
        return 0
    rows = sorted(page["results"], key=lambda q: (q["team"], q["gpu_type"]))
    if not rows:
        output.note("No quota" + (f" for team {args.team}." if args.team else " you can see."))
        return 0
    # A lending limit lowered under the borrowers leaves a team lending beyond it, said as the
    # admin's quota list says it: "8 (5 over its lending limit 3)", from the answer's lent_gpus and
    # lending_limit. Wide, in LENT NOW beside MAY LEND; the narrow view (80 columns, MAY LEND left
    # out) has no room for it there, so its LENT NOW stays a figure and a note under the table says it.
    # A borrowing limit lowered under a borrower likewise: "8 (5 over its borrowing limit 3)" in
    # BORROWED, or a note at 80 columns.
    narrow = terminal_width.columns() is not None

    def borrowing_limit(q: dict[str, Any]) -> int | None:
        return q["borrowing_limit"] if q.get("cohort") else None  # no cohort: no limit to pass

    def borrowed(q: dict[str, Any]) -> str:
        if narrow:
            return str(q["borrowed_gpus"])
        return quota_text.borrowed_within_limit_said(q["borrowed_gpus"], borrowing_limit(q))

    def lent(q: dict[str, Any]) -> str:
        if narrow:
            return quota_text.lent_said(q.get("lent_gpus") or 0)
        return quota_text.lent_within_limit_said(q.get("lent_gpus") or 0, q["lending_limit"], bool(q.get("cohort")))

    output.table(
        [(q["team"], q.get("cohort") or "-", q["gpu_type"], q["nominal_gpus"],
          quota_text.limit_said(q["borrowing_limit"], bool(q.get("cohort"))),
          quota_text.limit_said(q["lending_limit"], bool(q.get("cohort"))), q["held_gpus"], borrowed(q),
          lent(q)) for q in rows],
        ["TEAM", "COHORT", "GPU TYPE", "NOMINAL", "MAY BORROW", "MAY LEND", "HELD NOW", "BORROWED", "LENT NOW"],
        wide=["COHORT", "MAY LEND"],  # the narrow view fits 80 columns: what a team may use and uses
    )
    over_borrowing = [q for q in rows if (limit := borrowing_limit(q)) is not None and q["borrowed_gpus"] > limit]
    beyond = [q for q in rows
              if quota_text.lent_beyond(q.get("lent_gpus") or 0, q["lending_limit"], bool(q.get("cohort")))]
    shares = any(quota_text.is_share(q.get("lent_gpus") or 0) for q in rows)
    if (narrow and (beyond or over_borrowing)) or shares:
        print()
    for q in over_borrowing if narrow else []:
        output.note(
            f"{q['team']} {q['gpu_type']} BORROWED "
            f"{quota_text.borrowed_within_limit_said(q['borrowed_gpus'], borrowing_limit(q))}: it keeps the GPUs "
            "it runs on and borrows no more until it is back under its limit; a lender reclaiming its quota "
            "preempts them first.")
    for q in beyond if narrow else []:
        output.note(
            f"{q['team']} {q['gpu_type']} LENT NOW "
            f"{quota_text.lent_within_limit_said(q.get('lent_gpus') or 0, q['lending_limit'], True)}: "
            f"its borrowers keep the GPUs they run on and borrow no more, until a job of {q['team']} within its "
            "nominal reclaims them by preemption.")
    if shares:
        output.note(quota_text.LENT_SHARE_NOTE)
    return 0
