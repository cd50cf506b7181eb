"""Where a waiting job stands and when it may start, as its page says it (`qm status`, `qm explain`):
its place in the queue, its ETA and how far ETAs held lately, its likely start, its priority."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from controlplane.cli import output
from controlplane.cli.client import Api
from controlplane.services import eta_text as eta_words
from controlplane.services.percent_text import percent
from controlplane.services.queue_rank_text import rank_in_line
from controlplane.services.span_text import span_words
from scheduler_core.sentences import counted


def position_text(position: int | None, code: str | None, held: bool | None, resolvable: bool | None,
                  would_start_if: str = "") -> str:
    """A waiting job's queue position, and, for one not in line, where that puts it, as the
    job's page says it: a held job "is not in the queue" (its reason says so) and is ranked
    after every job in line; `queue position: 8` alone read as eighth in line. A job waiting
    for a dependency has no position (the engine gives it none: it cannot start until another
    job starts or ends), nor has a held job no cycle has ranked yet: what would put it in line
    is said instead, in the engine's words."""
    if position is None:
        if (held or code == "WaitingForDependency") and would_start_if:
            return f"none: not in line until {would_start_if}"
        return ""
    if held:
        return f"{position}, after every job in line (a held job is not in line)"
    if resolvable is False:
        return f"{position}, after every job that can start"
    return str(position)


def eta_text(value: str | None, *, relative: bool) -> str:
    """An ETA as the job's page says it: "<time> (in 2.0 h)"; once passed, "was <time>, passed
    3 min ago: no scheduling cycle has run since" (each cycle writes every waiting job's ETA anew,
    never before the cycle), not "(in 0s)" as if it were starting."""
    eta = output.parse_time(value)
    if eta is None:
        return output.utc_text(value)
    ahead = (eta - datetime.now(timezone.utc)).total_seconds()
    if ahead > 0:
        return f"{output.utc_text(value)} (in {output.human_distance(ahead)})" if relative else output.utc_text(value)
    return f"was {output.utc_text(value)}, passed {output.human_distance(-ahead)} ago: no scheduling cycle has run since"


def latest_start_text(state: str, eta: str | None, resolvable: bool, *, relative: bool, code: str | None = None,
                      would_start_if: str = "", held: bool = False) -> str:
    """When a job is expected to start at the latest, as `qm explain` and `qm status` both say
    it: its ETA, or, for a waiting job with none, why not in its page's words
    (services/eta_text.no_eta: held, can never run as asked, waiting for a dependency, not
    estimated this cycle); none for a job ended `unschedulable`, "-" for one past waiting.
    Until 7 Dec a waiting job not yet estimated was "unknown" here and "no estimate this cycle:
    the scheduler cannot promise a start for it yet" on its page, and one that can never run
    "none: it can never run as asked" here and "none: as asked, it will never start" there."""
    if state == "unschedulable":
        return eta_words.NEVER
    if state != "pending":
        return eta_text(eta, relative=relative) if eta else "-"
    if eta and resolvable and not held:
        return eta_text(eta, relative=relative)
    return eta_words.no_eta(held=held, resolvable=resolvable, code=code, would_start_if=would_start_if)


def eta_told_text(job: dict[str, Any]) -> str:
    """A started job's first ETA told and how far from it it started, as its page says it."""
    told, started = output.parse_time(job.get("eta_told")), output.parse_time(job.get("started_at"))
    if told is None or started is None:
        return ""
    gap = (started - told).total_seconds()
    how = f"started {output.human_distance(abs(gap))} {'after' if gap > 1 else 'before'} it"
    return f"{output.utc_text(job['eta_told'])} (told {output.utc_text(job.get('eta_told_at'))}), {how}"


def order_text(api: Api, job_id: int, *, can_run: bool = True) -> str:
    """A job in line: its priority, its team's dominant share, its runtime limit (among equals the
    shorter goes first) and its place in the next cycle's order, in its page's words (until 7 Dec
    "share", and no limit); of a job that can never run as asked (`can_run` False) that the place
    is by priority alone, and of one behind such jobs its place among those that can start, as its
    page says (services/queue_rank_text.py); "" for a job not in line."""
    body = api.request("GET", "jobs/priority/", params={"job": str(job_id)})
    if not body["jobs"]:
        return ""
    r = body["jobs"][0]
    aged = f" + {r['aging_points']:g} for waiting" if r["aging_points"] else ""
    limit = f"runtime limit {span_words(r['runtime_limit_s'])}" if r["runtime_limit_s"] else "no runtime limit"
    rank = rank_in_line(r["order"], body["in_line"], can_run=can_run, never_ahead=r.get("never_ahead", 0))
    return (f"{r['effective_priority']:g} (class {r['priority_class']} {r['class_value']:g}{aged}); team "
            f"{r['team']}'s dominant share {r['team_share']:.3f}; {limit}; {rank} (qm sprio)")


def eta_record_text(e: dict[str, Any]) -> str:
    """How far the ETAs told held lately, beside a waiting job's ETA, the fleet's and its size
    class's, as explain's `eta_record` gives them (the record its page says, of the same minute)."""
    r = e.get("eta_record")
    if not r or not r["judged"]:
        return ""
    share = f", the median one after {percent(r['median_share_of_wait'])} of the wait told" \
        if r["median_share_of_wait"] is not None else ""
    text = (f"at the latest, by runtime limits: of {counted(r['judged'], 'job')} that waited with an ETA in the "
            f"last {r['days']} days, {percent(r['on_time'])} started by the first one told{share}")
    own, missing = r.get("own_class"), e.get("likely_start_missing")
    # its class's figures once there are enough of them to tell a likely start by, as the page
    if own and own["judged"] and not (missing and missing["code"] == "too_few_of_its_size"):
        share = f", the median one after {percent(own['median_share_of_wait'])}" \
            if own["median_share_of_wait"] is not None else ""
        text += (f"; of them, {counted(own['judged'], 'job')} of {_size_class_text(own)}, as this one: "
                 f"{percent(own['on_time'])} by it{share}")
    return text


def _size_class_text(row: dict[str, Any]) -> str:
    """A size class in GPUs as the job page says it: "8+ GPUs", "fewer than 8 GPUs"."""
    return f"{row['node_gpus']}+ GPUs" if row["size_class"] == "large" else f"fewer than {row['node_gpus']} GPUs"


def likely_start_text(e: dict[str, Any]) -> str:
    """Where a waiting job's start lands at the median share of the wait first told that jobs of
    its size class had lately, as the API gives it (explain's `likely_start`, counted from the
    first ETA it was told in this wait, so it holds still while it waits) and the job's page
    says it, or that it passed; or why there is none (`likely_start_missing`, the page's words)."""
    likely, missing = e.get("likely_start"), e.get("likely_start_missing")
    if not likely:
        return f"none: {missing['reason']}" if missing else ""
    jobs = counted(likely["judged"], "job")
    if likely.get("size_class"):
        jobs += f" of {_size_class_text(likely)}"
    at = output.parse_time(likely["at"])
    if likely.get("passed") and at is not None:
        # to the nearest minute, as the page's "(3.0 h ago)" and qm's other distances: cut, 2 min
        # 59 s short of 3 h read "2h59m"
        when = (f"would have been about {output.utc_text(likely['at'])} ({output.ago(likely['at'])} ago): it waits "
                "longer than the median "
                "job of its size did")
    else:
        when = f"about {eta_text(likely['at'], relative=True)}"
    return (f"{when}, at the median {percent(likely['share_of_wait'])} of the wait first told that {jobs} had in "
            f"the last {likely['days']} days")


def first_eta_text(e: dict[str, Any]) -> str:
    """The first ETA a waiting job was told in this wait, when, and how far past it it is
    (explain's `first_eta`), as its page says it; "" when it has none."""
    first = e.get("first_eta")
    if not first:
        return ""
    late = float(first.get("late_s") or 0)
    return (f"{output.utc_text(first['at'])} (told {output.utc_text(first['told_at'])})"
            + (f", {output.human_distance(late)} past it" if late >= 1 else ""))
