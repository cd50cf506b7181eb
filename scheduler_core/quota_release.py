"""When a team's quota has room again: its own jobs' (and its cohort's) releases by runtime limits.

A job over its quota waits for GPUs of its team, or of the cohort that lends to it, to come
back; enforced runtime limits say when each holder ends. The reservation of a head job over
its quota (phase 5) and the ETA of every job over quota (phase 7) are read from here.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from itertools import accumulate, islice

from scheduler_core.context import CycleContext
from scheduler_core.state import JOB


def team_holders(ctx: CycleContext, team: str) -> list[str]:
    """The holders of ``team`` with a known end (keys of ``ctx.ends``). ``ends`` only gains
    keys during a cycle, so the grouping is extended with the keys added since last time."""
    seen, by_team = ctx.team_holders
    if seen < len(ctx.ends):
        for job_id in islice(ctx.ends, seen, None):
            spec = ctx.running[job_id].spec if job_id in ctx.running \
                else ctx.bound_specs.get(job_id)
            if spec is not None:
                by_team.setdefault(spec.team, []).append(job_id)
        ctx.team_holders = (len(ctx.ends), by_team)
    return by_team.get(team, [])


def team_ends(ctx: CycleContext, team: str, gpu_type: str) -> list[tuple[float, int]]:
    """(expected end, GPUs of ``gpu_type``) of every holder of ``team`` with a known end,
    sorted; true for the state as it is now."""
    ends: list[tuple[float, int]] = []
    holdings = ctx.state.holdings
    nodes = ctx.state.nodes
    for job_id in team_holders(ctx, team):
        gpus = 0
        for g in holdings.get((JOB, job_id), ()):
            if nodes[g.node].gpu_type == gpu_type:
                gpus += g.gpus
        if gpus:
            ends.append((ctx.ends[job_id], gpus))
    ends.sort()
    return ends


def team_released_by(ctx: CycleContext, team: str, gpu_type: str, at: float) -> int:
    """GPUs of ``gpu_type`` that ``team``'s jobs will have released by ``at``."""
    return sum(gpus for end, gpus in team_ends(ctx, team, gpu_type) if end <= at)


def team_release_eta(ctx: CycleContext, team: str, gpu_type: str, shortage: int,
                     ends: list[tuple[float, int]] | None = None) -> float | None:
    """When ``team`` will have released ``shortage`` GPUs of ``gpu_type`` by runtime limits.
    ``ends``: :func:`team_ends` for the current state, if the caller already has it."""
    if shortage <= 0:
        return ctx.snapshot.now
    if ends is None:
        ends = team_ends(ctx, team, gpu_type)
    total = 0
    for end, gpus in ends:
        total += gpus
        if total >= shortage:
            return end
    return None


def quota_eta_after_head(ctx: CycleContext, team: str, gpu_type: str, gpus: int,
                          head_gpus: int, head_end: float,
                          releases: dict[tuple[str, str], list[tuple[float, int]]],
                          cums: Cumulative, needs: NeedEtas, *, search: bool = True) -> float | None:
    """When ``team``'s quota admits ``gpus`` more GPUs of ``gpu_type`` while also holding
    ``head_gpus`` more until ``head_end`` (the head's reservation on its quota, or the jobs of
    the team ahead of it in the queue): before ``head_end`` it must fit with them, from then
    on alone. Use only falls as time passes, so that is the earlier of the time ``gpus +
    head_gpus`` fit and the later of ``head_end`` and the time ``gpus`` fit. Without
    ``search`` (a start weighed, not told: another GPU type of a job short of room), the time
    they fit together only when already known, and none of the searches below is spent on it:
    spent, the later jobs of the team were told the safe bound where they had been searched."""
    alone = _need_eta(ctx, team, gpu_type, gpus, releases, cums, needs)
    # past a few searches per team and type (a deep queue of one team's jobs), only the
    # later, safe bound: when the others have run
    searched = needs.get((team, gpu_type, -2)) or 0.0
    if search:
        needs[(team, gpu_type, -2)] = searched + 1
    with_them = _need_eta(ctx, team, gpu_type, gpus + head_gpus, releases, cums, needs) \
        if (search and searched < MAX_QUOTA_SEARCHES) or (team, gpu_type, gpus + head_gpus) in needs \
        else None
    after = None if alone is None or head_end == math.inf else max(head_end, alone)
    found = [t for t in (with_them, after) if t is not None]
    return min(found) if found else None


MAX_QUOTA_SEARCHES = 16
"""Quota ETAs with the team's jobs ahead held, searched per team and GPU type and cycle."""

NeedEtas = dict[tuple[str, str, int], float | None]
"""Per (team, GPU type, GPUs): when its quota admits that many more by runtime limits."""


def _need_eta(ctx: CycleContext, team: str, gpu_type: str, gpus: int,
              releases: dict[tuple[str, str], list[tuple[float, int]]],
              cums: Cumulative, needs: NeedEtas) -> float | None:
    key = (team, gpu_type, gpus)
    if key in needs:
        return needs[key]
    # more GPUs never fit earlier: once a size never fits, larger ones need no search
    never = needs.get((team, gpu_type, -1))
    if never is not None and gpus >= never:
        return None
    if ctx.ledger.cohort_of(team, gpu_type) is not None:
        found = cohort_release_eta(ctx, team, gpu_type, gpus, releases, cums=cums)
    else:
        ends, total = cumulative(ctx, team, gpu_type, releases, cums)
        need = ctx.ledger.check(team, gpu_type, gpus).shortage(gpus)
        k = bisect_left(total, need)
        found = ctx.snapshot.now if need <= 0 else (ends[k] if k < len(total) else None)
    needs[key] = found
    if found is None and (never is None or gpus < never):
        needs[(team, gpu_type, -1)] = float(gpus)
    return found


Cumulative = dict[tuple[str, str], tuple[list[float], list[int]]]
"""Per (team, GPU type): its release times and the GPUs released by each, cumulated."""


def cumulative(ctx: CycleContext, team: str, gpu_type: str,
               releases: dict[tuple[str, str], list[tuple[float, int]]],
               cums: Cumulative) -> tuple[list[float], list[int]]:
    """``team``'s release times of ``gpu_type`` GPUs and the GPUs released by each, cumulated
    (memoised in ``releases`` and ``cums``; phase 7 shares them with the quota promises'
    starts, ``quota_promises.start_beside_promises``)."""
    key = (team, gpu_type)
    found = cums.get(key)
    if found is None:
        if key not in releases:
            releases[key] = team_ends(ctx, *key)
        rows = releases[key]
        found = cums[key] = ([end for end, _ in rows], list(accumulate(g for _, g in rows)))
    return found


def cohort_release_eta(ctx: CycleContext, team: str, gpu_type: str, gpus: int,
                       releases: dict[tuple[str, str], list[tuple[float, int]]],
                       cums: Cumulative | None = None) -> float | None:
    """When ``team``'s quota admits ``gpus`` more GPUs of ``gpu_type`` as the running jobs of
    its cohort end by their runtime limits: its own jobs free its quota, the others' free what
    they lend. ``None`` if that never happens by known limits.

    Steps: the cohort's members on the type and, per member, its releases in time order
    (``releases`` memoises :func:`team_ends` per team and type); a
    binary search over the release times for the first at which a ledger charged with each
    member's use then admits the request. Use only falls as time passes, and admission only
    grows as use falls (less own use, more lent, less borrowed by others), so the search is
    sound. Jobs that start meanwhile are not foreseen (see :func:`quota_eta_after_head`)."""
    ledger = ctx.ledger
    cohort = ledger.cohort_of(team, gpu_type)
    members = ledger.cohort_members(cohort, gpu_type) if cohort is not None else ()
    freed: list[tuple[str, list[float], list[int]]] = []
    times: set[float] = set()
    cums = {} if cums is None else cums
    for member in members:
        ends, total = cumulative(ctx, member.team, gpu_type, releases, cums)
        freed.append((member.team, ends, total))
    # the cohort's release times, sorted once per cohort and type (under a key no team has)
    okey = ("", f"{cohort}\0{gpu_type}")
    if okey not in cums:
        for _, ends, _ in freed:
            times.update(ends)
        cums[okey] = (sorted(times), [])
    order = cums[okey][0]

    def admitted(at: float) -> bool:
        uses = {}
        for member, ends, total in freed:
            k = bisect_right(ends, at)
            uses[member] = ledger.used_by(member, gpu_type) - (total[k - 1] if k else 0)
        return ledger.admits_with(uses, team, gpu_type, gpus)

    lo, hi = 0, len(order)
    while lo < hi:
        mid = (lo + hi) // 2
        if admitted(order[mid]):
            hi = mid
        else:
            lo = mid + 1
    return order[lo] if lo < len(order) else None
