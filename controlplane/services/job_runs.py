"""A job's runs, as `sacct --duplicates` lists a requeued job's: one row per allocation it ever
held (each bind is a run: preempted and requeued, stopped to resize, fenced off a node, requeued
at someone's request or after it ended), oldest first, numbered from 1.

Per run: its generation (as its agents and its output know it: a fenced run keeps its own, the
fence's new one is `fenced_generation`), when it was bound, started and ended, how it ended (the
release reason's code, what became of the job, and in words), its GPUs (nodes, indices and, in a
heterogeneous gang, roles), the GPU-hours it held, whether on borrowed quota (and since when: a
run bound within its team's quota can come to count as borrowed while it runs, a `job.borrowing`
event), the work its requeue threw away, and what it cost. Everything is read from the allocation rows, their GPUs and
the events the transitions wrote for them (services/transitions.py): `describe` reads a page of
runs in two queries whatever its size; `runs_of` is the page's queryset.

- Elapsed: from the bind (the run's start: the job's `started_at` is its latest run's bind, and
  the history's Elapsed counts from it) to the release, or now; the agents' report of the run
  running (`started_at`) is said beside it, not counted from.
- GPU-hours held: from the bind (`created_at`) to the release (`released_at`; now while it
  holds GPUs), GPU by GPU, as the accounting counts allocated GPU-seconds (services/accounting
  `_spans`): a gang member whose processes ended before the rest stops counting then.
- Cost: the accounting's (`job_costs.run_costs`, three queries for all the job's runs), the
  same spans priced by the rollup's rule, in dollars to the cent, rounded cumulatively in bind
  order so the job's runs add up to its total (and an ended run's cents stay put), which is what showback charges the job once the rollup has caught up.
- Lost work: what the requeue event recorded (`lost_gpu_seconds`: GPUs × time since the last
  checkpoint); None when the run did not end in a requeue (nothing was recorded as lost).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, Q, QuerySet, Window

from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.models import Allocation, AllocationGpu, Event, Job
from controlplane.services import exit_codes
from controlplane.services.agent_protocol import RELEASE_GANG_MEMBER_EXITED, RELEASE_GANG_MEMBER_FAILED
from controlplane.services.job_costs import RunCosts
from controlplane.services.run_text import share_said
from controlplane.services.stopping import stopping_label
from controlplane.services.transitions import (
    FENCED_BECAUSE,
    RELEASE_CANCELLED,
    RELEASE_PREEMPTED,
    RELEASE_REQUEUED_HELD,
    RELEASE_RESIZED,
    RELEASE_RUNTIME_LIMIT,
    REQUESTED_REQUEUES,
    REQUEUED_HELD_AFTER_END,
    REQUEUES_AFTER_END,
    STOP_NOTICE_KINDS,
    fenced_because,
)

#: What became of the job when a run ended, or where a run stands while it holds GPUs.
OUTCOMES = ("starting", "running", "stopping", "requeued", "succeeded", "failed", "cancelled", "timed_out")

#: The reason code of a run that ended by itself (its processes exited): as its events say it.
EXITED = "Exited"

#: The events that tell a run's story: its stop's notice, its release or fence (and gang members'
#: early exits), and what became of the job.
#: (`job.stopping`, recorded as `job.preempting` before migration 0032, for a stop that is no preemption.)
_NOTICE_KINDS = (*STOP_NOTICE_KINDS, EventKind.JOB_CANCELLED, EventKind.JOB_TIMED_OUT)
_SETTLING_KINDS = (EventKind.JOB_PREEMPTED, EventKind.JOB_RESIZED, EventKind.JOB_REQUEUED, EventKind.JOB_FINISHED)
#: And `job.borrowing`: when a run bound within its team's quota came to count as borrowed.
_RUN_KINDS = (*_NOTICE_KINDS, *_SETTLING_KINDS, EventKind.ALLOCATION_RELEASED, EventKind.ALLOCATION_FENCED,
              EventKind.JOB_BORROWING)

#: A stop's reason as a run's end says it.
_STOPPED_BECAUSE = {
    RELEASE_PREEMPTED: "Preempted",
    RELEASE_RESIZED: "Stopped to resize",
    RELEASE_CANCELLED: "Cancelled",
    RELEASE_RUNTIME_LIMIT: "Stopped at its runtime limit",
    RELEASE_GANG_MEMBER_EXITED: "A gang member exited",
    RELEASE_GANG_MEMBER_FAILED: "A gang member failed",
}


@dataclass(frozen=True)
class GpuGroup:
    """The GPUs of a run on one node (and their role, in a heterogeneous gang)."""

    node: str
    gpu_indices: list[int]
    role: str = ""


@dataclass(frozen=True)
class AfterEnd:
    """The job was put back in the queue after this run had ended (`RequeuedAfterEnd`)."""

    at: datetime
    by: str
    reason: str
    held: bool


@dataclass
class Run:
    """One run of a job: one allocation, as the API, the job page and `qm runs` show it."""

    run: int
    allocation: Allocation
    generation: int
    fenced_generation: int | None
    outcome: str
    reason: str
    ended_how: str
    exit_code: int | None
    notice: str
    placement: list[GpuGroup]
    gpu_hours: float
    cost_usd: Decimal
    elapsed_s: int | None
    lost_gpu_hours: float | None
    requeued_after_end: AfterEnd | None
    roles: dict[str, int] = field(default_factory=dict)
    #: Since when it counted as borrowed: its bind for a run bound so, the scheduler's
    #: `job.borrowing` event for one bound within its team's quota that came to count so while it
    #: ran; None while `borrowed` is false. Why, in the event's words (empty for a run bound so).
    borrowed_from: datetime | None = None
    borrowed_because: str = ""
    #: Its GPU-hours as the job page's row says them: rounded cumulatively in bind order
    #: (`job_costs.RunCosts.gpu_hours`), so the rows add up to the job's GPU-hours above them.
    shown_gpu_hours: Decimal = Decimal("0.00")

    @property
    def gpu_hours_cell(self) -> float | Decimal:
        """What its GPU-hours cell says: its rounded share, but a few GPU-seconds whose share
        rounded to nothing read "< 0.01" (never "0", as the sentences say them)."""
        return share_said(self.shown_gpu_hours, self.gpu_hours)

    @property
    def gpus(self) -> int:
        return sum(len(g.gpu_indices) for g in self.placement)

    @property
    def nodes(self) -> list[str]:
        return list(dict.fromkeys(g.node for g in self.placement))

    @property
    def state(self) -> str:
        return str(self.allocation.state)

    @property
    def borrowed(self) -> bool:
        return bool(self.allocation.borrowed)

    @property
    def quota(self) -> str:
        """`own`, `borrowed` (from its bind), or `own→borrowed`: bound within its team's quota, it
        came to count as borrowed while it ran (`borrowed_from` says when), as `qm runs` says it."""
        if self.borrowed_from is None:
            return "own"
        return "borrowed" if self.borrowed_from <= self.bound_at else "own→borrowed"

    @property
    def bound_at(self) -> datetime:
        return self.allocation.created_at

    @property
    def started_at(self) -> datetime | None:
        return self.allocation.started_at

    @property
    def ended_at(self) -> datetime | None:
        return self.allocation.released_at

    @property
    def stop_deadline(self) -> datetime | None:
        """While it is being stopped: when its processes must be gone."""
        return self.allocation.release_deadline if self.allocation.state == AllocationState.RELEASING else None

    @property
    def where(self) -> str:
        """ "h100-1 ×2, h100-2 ×2", a heterogeneous gang's roles named: "h100-1 ×1 (ps)"."""
        return ", ".join(f"{g.node} ×{len(g.gpu_indices)}" + (f" ({g.role})" if g.role else "") for g in self.placement)


def runs_of(job: Job) -> QuerySet[Allocation]:
    """The job's runs, oldest first (its binds in order; the id breaks a tie)."""
    return Allocation.objects.filter(job_id=job.pk).order_by("created_at", "id")


def latest_runs(job: Job, count: int) -> tuple[list[Allocation], int]:
    """The job's latest `count` runs, oldest of them first, and how many runs it has in all: one
    query (the total is a window over every run, read with the rows)."""
    rows = list(Allocation.objects.filter(job_id=job.pk).annotate(total=Window(Count("id")))
                .order_by("-created_at", "-id")[:count])
    total = getattr(rows[0], "total", len(rows)) if rows else 0
    return rows[::-1], total


#: A run number past any job's runs: a job binds at most once a cycle.
PAST_EVERY_RUN = 10**12


def runs_before(job: Job, number: int, count: int) -> tuple[list[Allocation], int]:
    """The `count` runs before run `number` (runs max(1, number - count) to number - 1, oldest
    first), and how many runs the job has in all: one query, as `latest_runs`; a second only
    to count them when `number` is past them all (only that one from PAST_EVERY_RUN on)."""
    if number >= PAST_EVERY_RUN:
        return [], runs_of(job).count()
    start = max(0, number - 1 - count)
    rows = list(Allocation.objects.filter(job_id=job.pk).annotate(total=Window(Count("id")))
                .order_by("created_at", "id")[start:max(start, number - 1)])
    total = getattr(rows[0], "total", len(rows)) if rows else runs_of(job).count()
    return rows, total


def describe(job: Job, allocations: Sequence[Allocation], *, first: int, now: datetime,
             costs: RunCosts) -> list[Run]:
    """These runs of `job` (a page of `runs_of`, oldest first; `first`: the number of the first
    one) with everything a row says: two queries (their GPUs; their events), none for no run.
    `costs`: the job's `job_costs.run_costs` at `now`."""
    if not allocations:
        return []
    ids = [a.pk for a in allocations]
    gpus: dict[int, dict[tuple[str, int, str], list[int]]] = defaultdict(lambda: defaultdict(list))
    for allocation_id, node, node_id, index, role in (
        AllocationGpu.objects.filter(allocation_id__in=ids).order_by("node__name", "gpu_index")
        .values_list("allocation_id", "node__name", "node_id", "gpu_index", "role")
    ):
        gpus[allocation_id][(node, node_id, role)].append(index)
    by_allocation: dict[int, list[dict[str, Any]]] = defaultdict(list)
    after_end: dict[int, dict[str, Any]] = {}  # generation → the requeue of the job after it ended
    for event in (
        Event.objects.filter(Q(allocation_id__in=ids, kind__in=_RUN_KINDS)
                             | Q(job_id=job.pk, kind=EventKind.JOB_REQUEUED, reason__in=REQUEUES_AFTER_END,
                                 allocation__isnull=True))
        .order_by("created_at", "id")
        .values("allocation_id", "kind", "reason", "message", "data", "created_at", "node_id")
    ):
        if event["allocation_id"] is not None:
            by_allocation[event["allocation_id"]].append(event)
        else:
            generation = (event["data"] or {}).get("generation") if isinstance(event["data"], dict) else None
            if isinstance(generation, int):
                after_end[generation] = event  # the last one after that run wins
    return [_run(first + i, a, gpus[a.pk], by_allocation[a.pk], after_end.get(a.generation), now, costs.of(a.pk),
                 costs.hours_of(a.pk))
            for i, a in enumerate(allocations)]


def _data(event: dict[str, Any] | None) -> dict[str, Any]:
    data = event.get("data") if event is not None else None
    return data if isinstance(data, dict) else {}


def _run(number: int, allocation: Allocation, gpus: dict[tuple[str, int, str], list[int]],
         events: list[dict[str, Any]], requeued: dict[str, Any] | None, now: datetime, cost_usd: Decimal,
         shown_gpu_hours: Decimal) -> Run:
    fenced = next((e for e in events if e["kind"] == EventKind.ALLOCATION_FENCED), None)
    generation = allocation.generation
    fenced_generation = None
    if fenced is not None and isinstance(_data(fenced).get("old_generation"), int):
        generation, fenced_generation = _data(fenced)["old_generation"], allocation.generation
    settled = next((e for e in reversed(events) if e["kind"] in _SETTLING_KINDS), None)
    released = next((e for e in reversed(events) if e["kind"] == EventKind.ALLOCATION_RELEASED
                     and e["reason"] != "MemberExited"), None)
    notice = next((e for e in reversed(events) if e["kind"] in _NOTICE_KINDS), None)
    # When each node's member stopped holding GPUs, where a gang member ended before the rest.
    member_end = {e["node_id"]: e["created_at"] for e in events
                  if e["kind"] == EventKind.ALLOCATION_RELEASED and e["reason"] == "MemberExited"}
    end = allocation.released_at or now
    held_s = 0.0
    for (_, node_id, _), indices in gpus.items():
        until = min(end, member_end.get(node_id, end))
        held_s += len(indices) * max(0.0, (until - allocation.created_at).total_seconds())
    lost = None
    if settled is not None and settled["kind"] in (EventKind.JOB_PREEMPTED, EventKind.JOB_RESIZED,
                                                   EventKind.JOB_REQUEUED):
        lost = round(float(_data(settled).get("lost_gpu_seconds") or 0.0) / 3600, 4)
    exit_code = _data(settled).get("exit_code") if settled is not None and settled["kind"] == EventKind.JOB_FINISHED \
        else _data(released).get("exit_code")
    outcome, ended_how = _ending(allocation, settled, fenced, exit_code)
    roles: dict[str, int] = {}
    for (_, _, role), indices in gpus.items():
        if role:
            roles[role] = roles.get(role, 0) + len(indices)
    after = None
    if requeued is not None:
        data = _data(requeued)
        after = AfterEnd(at=requeued["created_at"], by=str(data.get("requested_by") or ""),
                         reason=str(data.get("reason") or ""), held=requeued["reason"] == REQUEUED_HELD_AFTER_END)
    # From the bind, its start as the job's `started_at`, the history's Elapsed and sacct's count
    # it, and as its GPU-hours and cost do; its agents' report of it running is `started_at`.
    # (It counted from that report: the run read a minute shorter than the history said it.)
    elapsed = max(0, int((end - allocation.created_at).total_seconds()))
    reason = allocation.release_reason
    if not reason and allocation.state in (AllocationState.RELEASED, AllocationState.FENCED):
        reason = EXITED
    borrowed_from, borrowed_because = _borrowed_since(allocation, events)
    return Run(
        run=number, allocation=allocation, generation=generation, fenced_generation=fenced_generation,
        outcome=outcome, reason=reason, ended_how=ended_how, exit_code=exit_code if isinstance(exit_code, int) else None,
        notice=str(notice["message"]) if notice is not None else "",
        placement=[GpuGroup(node, indices, role) for (node, _, role), indices in gpus.items()],
        gpu_hours=round(held_s / 3600, 4), cost_usd=cost_usd, elapsed_s=elapsed, lost_gpu_hours=lost, requeued_after_end=after,
        roles=roles, shown_gpu_hours=shown_gpu_hours, borrowed_from=borrowed_from, borrowed_because=borrowed_because,
    )


def _borrowed_since(allocation: Allocation, events: list[dict[str, Any]]) -> tuple[datetime | None, str]:
    """Since when the run has counted as borrowed, and why: the last `job.borrowing` event that
    made it so, else its bind (bound so, or a flag set before those events were written, 7 Dec);
    (None, "") while its flag says own. Its flag is what the run is now or was at its release."""
    if not allocation.borrowed:
        return None, ""
    since = next((e for e in reversed(events) if e["kind"] == EventKind.JOB_BORROWING and _data(e).get("borrowed")),
                 None)
    if since is None:
        return allocation.created_at, ""
    return since["created_at"], str(since["message"])


def _ending(allocation: Allocation, settled: dict[str, Any] | None, fenced: dict[str, Any] | None,
            exit_code: Any) -> tuple[str, str]:
    """(outcome, how the run ended in words): from the event that settled the job, else from the
    allocation's own state and reason (a run still holding GPUs, or one settled before events
    said so)."""
    reason = allocation.release_reason
    if allocation.state == AllocationState.ACTIVE:
        return ("running", "Running") if allocation.started_at else ("starting", "Bound; its agents are starting it")
    if allocation.state == AllocationState.RELEASING:
        return "stopping", "Being stopped: " + stopping_label(reason).removeprefix("stopping: ")
    code = f" (exit code {exit_codes.said(exit_code)})" if isinstance(exit_code, int) else ""
    nodes = [str(n) for n in _data(fenced).get("nodes") or []] if fenced is not None else []
    kind = settled["kind"] if settled is not None else ""
    if kind == EventKind.JOB_PREEMPTED:
        if fenced is not None:  # its node was lost before it confirmed the stop: still a preemption
            return "requeued", (f"Preempted; requeued ({fenced_because(str(fenced['reason']), nodes)} "
                                "before confirming the stop)")
        return "requeued", "Preempted; requeued"
    if kind == EventKind.JOB_RESIZED:
        return "requeued", "Stopped to resize; requeued"
    if kind == EventKind.JOB_REQUEUED:
        data = _data(settled)
        if settled is not None and settled["reason"] in REQUESTED_REQUEUES:
            by = str(data.get("requested_by") or "someone")
            why = str(data.get("reason") or "")
            held = " held" if settled["reason"] == RELEASE_REQUEUED_HELD else ""
            words = f"Requeued{held} by {by}" + (f": {why}" if why else "")
            if fenced is not None:
                words += f" (fenced: {fenced_because(str(fenced['reason']), nodes)})"
            return "requeued", words
        because = fenced_because(str(settled["reason"] if settled else reason), nodes)
        return "requeued", because[0].upper() + because[1:] + "; requeued"
    if kind == EventKind.JOB_FINISHED:
        state = str(_data(settled).get("state") or "")
        stopped = _STOPPED_BECAUSE.get(reason, "")
        if state == JobState.SUCCEEDED:
            return "succeeded", (f"{stopped}; the job succeeded{code}" if stopped else f"Succeeded{code}")
        if state == JobState.FAILED:
            return "failed", (f"{stopped}; the job failed{code}" if stopped else f"Failed{code}")
        if state == JobState.CANCELLED:
            return "cancelled", "Cancelled" + (f" ({fenced_because(str(fenced['reason']), nodes)})" if fenced else "")
        if state == JobState.TIMED_OUT:
            return "timed_out", "Timed out at its runtime limit"
    # No settling event (written before they named their allocation): the stop's reason alone.
    if reason in (RELEASE_PREEMPTED, RELEASE_RESIZED, *REQUESTED_REQUEUES) or reason in FENCED_BECAUSE:
        return "requeued", _STOPPED_BECAUSE.get(reason, "Fenced") + "; requeued"
    if reason == RELEASE_CANCELLED:
        return "cancelled", "Cancelled"
    if reason == RELEASE_RUNTIME_LIMIT:
        return "timed_out", "Timed out at its runtime limit"
    if exit_code == 0:
        return "succeeded", "Succeeded" + code
    return "failed", f"Failed{code}" if code else "Ended without an exit code"



# ------------------------------------------------------------------ runs of many jobs, for a replay


#: How a run ended in a requeue, as the what-if replay tells them apart (frontend/whatif.py): the
#: scheduler's own stop (a preemption, a resize), the loss of a node under it (fenced), or a
#: requeue someone asked for, not held or held (`qm requeue`, `qm requeue --hold`).
REQUEUED_BY_SCHEDULER, REQUEUED_OFF_A_LOST_NODE, REQUEUE_ASKED, REQUEUE_ASKED_HELD = (
    "scheduler", "node", "asked", "asked_held")


@dataclass(frozen=True)
class RunSpan:
    """One run of a job as a replay reads it: from its bind to its release (`ended_at`; None while
    it holds GPUs), on `gpus` GPUs; `requeued`: how it ended in a requeue ("" for a run that
    ended otherwise, or has not ended), at `requeued_at` (the requeue's event: the job back in the
    queue), throwing away `lost_gpu_s` (GPUs × time since the last checkpoint, as recorded)."""

    bound_at: datetime
    ended_at: datetime | None
    gpus: int
    requeued: str = ""
    requeued_at: datetime | None = None
    lost_gpu_s: float = 0.0

    @property
    def kept_s(self) -> float:
        """Seconds of work its requeue kept for the next run: the run to its last checkpoint (its
        length less the time its lost work stands for); none for a run not requeued."""
        if not self.requeued or self.ended_at is None:
            return 0.0
        return max(0.0, (self.ended_at - self.bound_at).total_seconds() - self.lost_gpu_s / max(1, self.gpus))


@dataclass(frozen=True)
class Resubmission:
    """The job put back in the queue after it had ended (`RequeuedAfterEnd`), at `at`, from
    `from_state` (how that end left it), held or not."""

    at: datetime
    from_state: str
    held: bool


@dataclass(frozen=True)
class RunHistory:
    runs: tuple[RunSpan, ...]
    resubmissions: tuple[Resubmission, ...]


def run_history(job_ids: Sequence[int], *, until: datetime) -> dict[int, RunHistory]:
    """Every run of each of `job_ids` bound before `until` (oldest first) and every requeue of it
    after an end before then, as the allocation rows and the requeue events record them: two
    queries whatever their number. A release or requeue after `until` is not known yet (the run
    still holds GPUs then). Jobs never bound nor requeued are left out."""
    runs: dict[int, list[tuple[int, RunSpan]]] = defaultdict(list)
    for job_id, pk, bound, released, gpus in (
            Allocation.objects.filter(job_id__in=list(job_ids), created_at__lt=until)
            .annotate(gpu_count=Count("gpus")).order_by("job_id", "created_at", "id")
            .values_list("job_id", "pk", "created_at", "released_at", "gpu_count")):
        runs[job_id].append((pk, RunSpan(bound, released if released is not None and released < until else None,
                                         gpus)))
    settled: dict[int, tuple[str, datetime, float]] = {}
    resubmissions: dict[int, list[Resubmission]] = defaultdict(list)
    for job_id, allocation_id, kind, reason, at, data in (
            Event.objects.filter(job_id__in=list(job_ids), created_at__lt=until,
                                 kind__in=(EventKind.JOB_PREEMPTED, EventKind.JOB_RESIZED, EventKind.JOB_REQUEUED))
            .order_by("created_at", "id").values_list("job_id", "allocation_id", "kind", "reason", "created_at",
                                                      "data")):
        data = data if isinstance(data, dict) else {}
        if allocation_id is None:
            if reason in REQUEUES_AFTER_END:
                resubmissions[job_id].append(Resubmission(at, str(data.get("from_state") or ""),
                                                          reason == REQUEUED_HELD_AFTER_END))
            continue
        if kind in (EventKind.JOB_PREEMPTED, EventKind.JOB_RESIZED):
            how = REQUEUED_BY_SCHEDULER
        elif reason == RELEASE_REQUEUED_HELD:
            how = REQUEUE_ASKED_HELD
        elif reason in REQUESTED_REQUEUES:
            how = REQUEUE_ASKED
        else:
            how = REQUEUED_OFF_A_LOST_NODE
        settled[allocation_id] = (how, at, float(data.get("lost_gpu_seconds") or 0.0))
    history = {}
    for job_id in set(runs) | set(resubmissions):
        spans = []
        for pk, span in runs.get(job_id, ()):
            if pk in settled:
                how, at, lost = settled[pk]
                # the requeue settles once the run has released its GPUs: its end is the release
                span = RunSpan(span.bound_at, span.ended_at or at, span.gpus, how, at, lost)
            spans.append(span)
        history[job_id] = RunHistory(tuple(spans), tuple(resubmissions.get(job_id, ())))
    return history
