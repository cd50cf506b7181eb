"""The running jobs a preemption search may look at, indexed once per cycle.

A preemption search (:func:`scheduler_core.preemption.preempt_for`) asks, for one waiting
job, which running jobs it could preempt. Walking every running job for every search is what
made a full fleet slow (up to 16 searches × ~3,000 running jobs, each recomputing the job's
GPUs per type from its grants). Two facts make an index exact:

* Whether a job could *ever* be a victim of a preemptor depends only on the job's borrowed
  flag, team, priority class and GPU types, and on the preemptor's priority class and team:
  tier 0 needs borrowed work; tier 1 a preemptible job of a strictly lower priority value
  that is borrowed, of the preemptor's team, or on a GPU type no quota governs.
  :meth:`VictimIndex.pool` keeps, per preemptor priority and team, the jobs passing that
  test, in ``ctx.running`` order, so a search sees the same jobs in the same order as a walk
  of every running job would, minus those it could never preempt (in a full fleet, most).
* What a running job holds changes during a cycle only when it is killed, preempted or
  resized (those jobs are skipped by every search) or inside a what-if, which is undone
  before the next search. So its GPUs per type, its GPU count and its node classes, taken at
  the first search of the cycle, stay true for every search that may still pick it.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler_core.plugins.protocols import VictimCandidate
from scheduler_core.quota import QuotaLedger
from scheduler_core.sentences import counted
from scheduler_core.state import JOB, ClusterState, Grant
from scheduler_core.types import PreemptionReason, PriorityClassInfo, RunningJob


@dataclass(frozen=True, slots=True)
class Held:
    """A running job and what it holds at its first search of the cycle."""

    job_id: str
    job: RunningJob
    by_type: dict[str, int]
    gpus: int
    classes: frozenset[int]


@dataclass(frozen=True, slots=True)
class Offer:
    """One way a running job frees GPUs: preempted whole (``part`` is ``None``) or giving up
    the replicas of ``part``."""

    candidate: VictimCandidate
    team: str
    part: list[Grant] | None


class VictimIndex:
    """Possible victims per preemptor priority, built lazily once per cycle."""

    def __init__(self, running: dict[str, RunningJob], priority: dict[str, PriorityClassInfo],
                 ledger: QuotaLedger, state: ClusterState, now: float) -> None:
        # the cycle's own objects (``CycleContext``'s), read as they are at each search
        self._running = running
        self._priority = priority
        self._ledger = ledger
        self._state = state
        self._now = now
        self._pools: dict[tuple[int, bool, str], list[Held]] = {}
        self._rows: list[tuple[RunningJob, PriorityClassInfo | None]] | None = None
        self._held: dict[str, Held] = {}
        self._protection: dict[str, str | None] = {}
        self.offers: dict[tuple[str, int, PreemptionReason], list[Offer]] = {}
        """A job's offers under a tier and reason: its GPUs, lost work and replicas do not
        change while it can still be picked (the second fact above), so every search of the
        cycle shares them."""

    def pool(self, mine: PriorityClassInfo, team: str) -> list[Held]:
        """Running jobs (not terminating) a job of class ``mine`` and team ``team`` might
        preempt: borrowed ones, and, if ``mine`` may preempt lower classes, preemptible ones
        of a strictly lower priority value of ``team`` or holding GPUs of a type no quota
        governs; in ``ctx.running`` order. Jobs holding nothing are left out."""
        key = (mine.value, mine.may_preempt_lower, team)
        found = self._pools.get(key)
        if found is not None:
            return found
        if self._rows is None:
            priority = self._priority
            self._rows = [(job, priority.get(job.spec.priority_class))
                          for job in self._running.values() if not job.terminating]
        lower = mine.may_preempt_lower
        governed = self._ledger.governed_types
        out: list[Held] = []
        for job, theirs in self._rows:
            if not job.borrowed and not (lower and theirs is not None and theirs.preemptible
                                         and theirs.value < mine.value):
                continue
            held = self.held(job)
            if held is None:
                continue
            if job.borrowed or job.spec.team == team \
                    or any(t not in governed for t in held.by_type):
                out.append(held)
        self._pools[key] = out
        return out

    def held(self, job: RunningJob) -> Held | None:
        """What ``job`` holds (``None`` if nothing), computed at its first call this cycle."""
        job_id = job.spec.id
        found = self._held.get(job_id)
        if found is not None:
            return found
        state = self._state
        grants = state.holdings.get((JOB, job_id))
        if not grants:
            return None
        nodes = state.nodes
        node_class = state.node_class
        by_type: dict[str, int] = {}
        gpus = 0
        for g in grants:
            n = g.gpus
            t = nodes[g.node].gpu_type
            by_type[t] = by_type.get(t, 0) + n
            gpus += n
        found = Held(job_id, job, by_type, gpus, frozenset(node_class[g.node] for g in grants))
        self._held[job_id] = found
        return found

    def protection(self, job: RunningJob) -> str | None:
        """Why ``job`` may not be preempted now (minimum runtime, preemption budget)."""
        job_id = job.spec.id
        if job_id in self._protection:
            return self._protection[job_id]
        why = _protection(self._priority, self._now, job)
        self._protection[job_id] = why
        return why


def budget_lifts_at(job: RunningJob, pc: PriorityClassInfo, now: float) -> float | None:
    """When ``job``, at or over its class ``pc``'s preemption budget now, may be preempted
    again: the snapshot's ``preemption_budget_frees_at`` if it is still to come, else ``None``
    (unknown, or a snapshot that has it in the past while still counting the job over its
    budget: the count decides, so no time can be promised). Never for a class whose budget is
    0: the snapshot has a time when the job was preempted inside the window (before its class's
    budget was lowered), but a job of such a class stays protected once that preemption has
    left the window."""
    frees = job.spec.preemption_budget_frees_at
    return frees if frees is not None and frees > now and pc.preemption_budget > 0 else None


def _window(seconds: int) -> str:
    """A budget window as people say it: "24 h", "30 min", "90 s"."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def _protection(priority: dict[str, PriorityClassInfo], now: float, job: RunningJob) -> str | None:
    """Why ``job`` may not be preempted now, with numbers: "job v has run 400 s of its 3600 s
    minimum runtime", "job v was preempted 3 times in the last 24 h, its budget, and may be
    preempted again from t=90000" (the time when the snapshot knows it), or both."""
    pc = priority.get(job.spec.priority_class)
    if pc is None:
        return None
    ran = now - job.started_at
    young = ran < pc.min_runtime_s
    times = job.spec.preemptions_in_window
    spent = times >= pc.preemption_budget
    if not young and not spent:
        return None
    why = f"job {job.spec.id}"
    if young:
        why += f" has run {ran:.0f} s of its {pc.min_runtime_s} s minimum runtime"
    if spent and pc.preemption_budget == 0:
        # no count to report: the class allows none ("was preempted 0 times ..., its budget"
        # read as if the job had used something up)
        why += (f"{' and' if young else ''} is of class {pc.name}, whose preemption budget of 0 "
                f"allows none")
    elif spent:
        budget = ("its budget" if times == pc.preemption_budget
                  else f"over its budget of {pc.preemption_budget}")
        lifts = budget_lifts_at(job, pc, now)
        again = "" if lifts is None else f", and may be preempted again from t={lifts:.0f}"
        why += (f"{' and' if young else ''} was preempted {counted(times, 'time')} in the last "
                f"{_window(pc.budget_window_s)}, {budget}{again}")
    return why
