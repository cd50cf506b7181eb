"""Quota promised to jobs that start later: the head's reservation, a nominated preemptor.

EASY backfill keeps later jobs off the GPUs promised to the head (seed 000); a team's quota is
one more thing the promise needs. A job promised GPUs at ``start_at`` starts then only if its
team's quota admits it then, so a later job of the same team that would still hold GPUs of a
promised type at that time may start now only within what the quota can spare beside the
promise: what is left of the quota now, plus what the team's own jobs release by then (by
their runtime limits), less what the promised job needs. Jobs of other teams, and jobs that
end before the promise starts, are never held back by it.

Until 5 Dec 2026 only a head its quota refused now (waiting for its own team's jobs to end)
was so guarded: a head of 8 GPUs within its team's 8 was reserved a node from t=3600, and a
later job of its team without a runtime limit started at once on 4 other GPUs, so that at
t=3600 the quota refused the head and its reservation slid, cycle after cycle, while its own
team backfilled.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from scheduler_core.admission import UNLIMITED
from scheduler_core.context import CycleContext
from scheduler_core.quota_release import team_released_by
from scheduler_core.state import Grant
from scheduler_core.types import JobSpec


@dataclass(slots=True)
class QuotaPromise:
    """What the quota of ``team`` must still hold for job ``job_id`` at ``start_at``:
    per governed GPU type, how many more GPUs the team may take this cycle for longer than
    until then (``slack``; charged by :func:`charge_promises`)."""

    job_id: str
    team: str
    start_at: float
    slack: dict[str, int]
    ends_at: float | None
    """When the promised job will have run, by its runtime limit (``None``: it has none)."""
    gpus: dict[str, int]
    """The promised GPUs per governed type."""

    def overlaps(self, start_at: float, ends_at: float | None) -> bool:
        """Does the promised job run at some time between ``start_at`` and ``ends_at``?"""
        return not ((self.ends_at is not None and self.ends_at <= start_at)
                    or (ends_at is not None and ends_at <= self.start_at))


@dataclass(frozen=True, slots=True)
class BrokenPromise:
    """The promise starting a job now would break: whose, when, on which GPU type, and when
    the promised job will have run (by its runtime limit; ``None``: it has none)."""

    job_id: str
    start_at: float
    gpu_type: str
    ends_at: float | None


def promise_quota(ctx: CycleContext, spec: JobSpec, start_at: float, grants: Iterable[Grant],
                  released: dict[str, int] | None = None) -> None:
    """``spec`` is promised ``grants`` from ``start_at``: record what its team's quota must
    still hold for it then. ``released``: GPUs per type its team gives back by then besides
    its jobs' runtime limits (a preemptor's victims of its own team). Called again when the
    promise moves (the head's reservation moving to other GPUs), it is measured afresh from
    the cycle's state."""
    by_type: dict[str, int] = {}
    nodes = ctx.state.nodes
    for g in grants:
        t = nodes[g.node].gpu_type
        by_type[t] = by_type.get(t, 0) + g.gpus
    slack: dict[str, int] = {}
    for t, gpus in by_type.items():
        if ctx.ledger.governs(t):
            verdict = ctx.ledger.check(spec.team, t, UNLIMITED)  # the whole verdict: room too
            given_back = team_released_by(ctx, spec.team, t, start_at)
            if released:
                given_back += released.get(t, 0)
            slack[t] = given_back - verdict.shortage(gpus)
    ctx.quota_promises.pop(spec.id, None)
    if not slack:
        return
    ends_at = None if spec.runtime_limit_s is None else start_at + spec.runtime_limit_s
    promise = QuotaPromise(spec.id, spec.team, start_at, slack, ends_at,
                           {t: by_type[t] for t in slack})
    # promises of one team that run at the same time share its quota: each leaves the other's
    for other in ctx.quota_promises.values():
        if other.team == spec.team and other.overlaps(start_at, ends_at):
            for t, gpus in other.gpus.items():
                if t in slack:
                    slack[t] -= gpus
            for t, gpus in promise.gpus.items():
                if t in other.slack:
                    other.slack[t] -= gpus
    ctx.quota_promises[spec.id] = promise


def promised_to_team(ctx: CycleContext, team: str, gpu_type: str) -> int:
    """The ``gpu_type`` GPUs promised to ``team``'s jobs this cycle, which its quota must hold
    beside a job it admits later (a head over its quota waits for them as well)."""
    return sum(p.gpus.get(gpu_type, 0) for p in ctx.quota_promises.values() if p.team == team)


def _holds_past(ctx: CycleContext, spec: JobSpec, at: float) -> bool:
    """Would ``spec``, started now, still hold its GPUs at ``at`` (by its runtime limit)?"""
    return spec.runtime_limit_s is None or ctx.snapshot.now + spec.runtime_limit_s > at


def broken_promise(ctx: CycleContext, spec: JobSpec,
                   gpus_of_type: dict[str, int]) -> BrokenPromise | None:
    """The promise that starting ``spec`` now on these GPUs would break, its team's quota
    refusing the promised job at its start; ``None`` if none."""
    for promise in ctx.quota_promises.values():
        if promise.team != spec.team or promise.job_id == spec.id \
                or not _holds_past(ctx, spec, promise.start_at):
            continue
        for t, gpus in gpus_of_type.items():
            if gpus > 0 and gpus > promise.slack.get(t, gpus):
                return BrokenPromise(promise.job_id, promise.start_at, t, promise.ends_at)
    return None


def charge_promises(ctx: CycleContext, spec: JobSpec, gpus_of_type: dict[str, int]) -> None:
    """Record a start (or growth) of ``spec`` that will still hold these GPUs when the
    promises of its team start."""
    for promise in ctx.quota_promises.values():
        if promise.team != spec.team or promise.job_id == spec.id \
                or not _holds_past(ctx, spec, promise.start_at):
            continue
        for t, gpus in gpus_of_type.items():
            if t in promise.slack:
                promise.slack[t] -= gpus


def room_beside_promises(ctx: CycleContext, team: str, gpu_type: str | None, gpus: int) -> bool:
    """Does ``team``'s quota admit ``gpus`` more ``gpu_type`` GPUs beside what is promised to
    its jobs this cycle? Asked before a job of the team is promised GPUs itself (the head's
    reservation): its quota admitting it now, with a job ahead of it promised that quota,
    promised the same GPUs of quota twice. (A mixed-type option, ``None``, is not judged.)"""
    if gpu_type is None or not ctx.quota_promises:
        return True
    promised = promised_to_team(ctx, team, gpu_type)
    return promised == 0 or ctx.ledger.check(team, gpu_type, gpus + promised).admitted
