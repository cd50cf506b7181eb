"""Phase 7: a reason, a sentence with numbers and an ETA for every job left waiting.

Statuses carry what happens next (Kubernetes' Unschedulable vs UnschedulableAndUnresolvable):
``resolvable`` is ``False`` only when waiting cannot help (``CanNeverRun``, an invalid request,
an unknown priority class). Numbers in the sentences are the ones the deciding phase saw.

ETAs: a reservation or a nomination knows its start; a job over quota gets the time its team's
own jobs will have released enough GPUs by their runtime limits, or the first release time at
which its gang fits if that is later (it needs both); a job short of capacity gets
the later of two estimates (:class:`~scheduler_core.release_timeline.ReleaseTimeline`): the first
release time at which enough capable GPUs (and a node with room for each member that needs
one of its own) are free (for a packed heterogeneous gang, the release time at which the placer
places it, :meth:`ReleaseTimeline.placed_frame`), and the time by which the capacity of its node classes has run the work of the jobs ahead
of it in the queue that wait for the same classes, for GPUs or only for a maintenance window
(their GPUs x runtime limits, or
``default_runtime_estimate_s``; GPUs already held for them excluded), back to back. That second
term is what makes a job's ETA grow with its queue position; it ignores fragmentation and
backfill, so it is an estimate and the message says so. GPUs promised to a reservation or a
nomination stay busy in the timeline until that job has run, so its work is not counted ahead.
A job that would borrow what its cohort lends, promised to jobs of other teams (or its own
team's quota, promised to the team's jobs), starts when the engine's rules beside those
promises would let it once its GPUs are there, at the latest when that quota is free again for
it (``Outcome.lending_free_at``; ``quota_promises.start_beside_promises``).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from typing import NamedTuple

from scheduler_core.admission import capable_classes
from scheduler_core.context import CycleContext
from scheduler_core.diagnosis import type_names
from scheduler_core.eligibility import OutOfLine, out_of_line
from scheduler_core.gang import Demand, Member
from scheduler_core.maintenance import run_end
from scheduler_core.outcome import Outcome
from scheduler_core.placement import PlacementRequest
from scheduler_core.quota_promises import ends_before, start_beside_promises
from scheduler_core.quota_release import (
    Cumulative,
    NeedEtas,
    cohort_release_eta,
    quota_eta_after_head,
    team_ends,
    team_release_eta,
)
from scheduler_core.release_timeline import DOMAIN_TOPOLOGIES, ReleaseTimeline
from scheduler_core.sentences import counted, verb
from scheduler_core.types import (
    JobSpec,
    PendingExplanation,
    ReasonCode,
    TopologyConstraint,
    pending_explanation,
)

REASONS: dict[ReasonCode, str] = {code: code.value for code in ReasonCode}
"""PascalCase reason per code (a dict lookup is cheaper than the enum's ``value``)."""

CAPACITY_CODES = frozenset({
    ReasonCode.INSUFFICIENT_GPUS,
    ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS,
    ReasonCode.INSUFFICIENT_CPU,
    ReasonCode.INSUFFICIENT_MEMORY,
    ReasonCode.TOPOLOGY_UNSATISFIED,
    ReasonCode.BEHIND_HIGHER_PRIORITY,
    ReasonCode.PREEMPTION_BUDGET_EXHAUSTED,
    ReasonCode.MINIMUM_RUNTIME_PROTECTED,
})

PROTECTED_CODES = frozenset({ReasonCode.PREEMPTION_BUDGET_EXHAUSTED, ReasonCode.MINIMUM_RUNTIME_PROTECTED})
"""Preemption would start the job, but what it would preempt may not be preempted yet."""

AHEAD_CODES = CAPACITY_CODES | {ReasonCode.WAITING_FOR_RESERVATION,
                                ReasonCode.WAITING_FOR_PREEMPTION}
"""Waiting jobs whose work counts as *ahead* of later jobs on the same node classes: those
waiting for capacity (not those waiting for their quota, which may start much later). A job
waiting only for a maintenance window counts too (:meth:`_Explainer.place`)."""


FIRST_ON = " It would start first on its"
MAY_START_ON = " It may start first on its"
"""How the sentence of a job short of room on several GPU types names the type whose start
it tells, or (no start known there) may come first (:meth:`_Explainer._word_elsewhere`)."""


class _Worded(NamedTuple):
    """What :func:`explain` needs of one outcome, worded once however many jobs share it (a
    named tuple: built in C, unpacked per job)."""

    base: float | None
    """The outcome's own ETA, or the one estimated from runtime limits (capacity, quota)."""
    text: str
    code: ReasonCode
    reason: str
    resolvable: bool
    would: str
    line: _DrainLine | None
    """The queue's drain line on its classes, for jobs that wait behind others there."""
    drains: bool
    """Short of capacity with no ETA of its own: it waits for the work queued ahead to drain."""
    fits_now: bool
    demand_gpus: int
    estimated: bool
    """Its ETA is an estimate (not the reservation's or nomination's own start)."""
    position_free: str | None
    """Its sentence with the estimate when the queue ahead changes nothing."""
    quota_at: float | None
    """When its quota has room (by runtime limits), for a job over its quota."""
    adds: bool
    """Its own work counts for the jobs behind it on its classes."""
    quota_type: str | None
    capacity_part: tuple[float | None, bool] | None
    preset: float | None
    """The start a preemption would give it, for a job over quota that may preempt later."""
    charged: str | None
    """The GPU type it will charge to its team's quota once it starts."""
    alternatives: tuple[_Worded, ...] = ()
    """Over its quota on several GPU types: its words per type (the start is the earliest)."""
    demand: Demand | None = None
    classes: tuple[int, ...] = ()
    """Its gang and capable classes, to check an estimated start against maintenance windows."""
    lending_free_at: float | None = None
    lending_words: str = ""
    """When what it would borrow of its cohort's lending, promised to other teams' jobs, is
    free again, and why (``Outcome.lending_free_at``)."""
    promised_gpus: tuple[str, int] | None = None
    promised_room: str = ""
    lending_would: str = ""
    """What phase 7 asks the promises about a start before ``lending_free_at``, and its words
    (``Outcome.promised_gpus``)."""
    on_types: tuple[_Worded, ...] = ()
    """Short of room on several GPU types it accepts: its words per type, its first type's
    first (``Outcome.elsewhere``; the start is the earliest)."""
    on_shared_classes: bool = False
    """Some type of ``on_types`` shares node classes with its first (a gang's mixed option
    beside its one-type options): told once per outcome, not per job
    (:meth:`_Explainer._place_first_room`)."""


class _Explainer:
    """Phase 7's memos for one cycle: the release timeline, ETAs per gang shape and per quota,
    the queue's drain lines, and along the queue the work and the quota its waiting jobs will
    take. The state no longer changes in this phase, so every memo holds for the cycle."""

    def __init__(self, ctx: CycleContext) -> None:
        self.ctx = ctx
        self.timeline: ReleaseTimeline | None = None
        # ReleaseTimeline.eta depends only on the gang's GPU count, the nodes its members need
        # (Demand.node_needs), the classes, the topology and distinct nodes: requests that differ in
        # CPUs or memory per GPU share one estimate, except gangs on distinct nodes, whose nodes
        # are counted with room for their members' CPUs and memory (the members are in the
        # key). The flag: does the capacity suffice already?
        self.etas: dict[tuple[int, tuple[tuple[int, int], ...], tuple[int, ...], TopologyConstraint, bool,
                              tuple[Member, ...]],
                        tuple[float | None, bool]] = {}
        # per packed heterogeneous gang, classes and score plugin: the frame it is placed at
        self.placed: dict[tuple[Demand, tuple[tuple[int, ...], ...], str], int | None] = {}
        self.quota_etas: dict[tuple[str, str, int], float | None] = {}
        self.releases: dict[tuple[str, str], list[tuple[float, int]]] = {}
        self.cums: Cumulative = {}
        self.needs: NeedEtas = {}
        # Outcomes shared by many jobs (memoised for identical shapes) are worded once; keyed
        # by identity because hashing an Outcome would hash its whole gang.
        self.worded: dict[int, _Worded] = {}
        # Work (GPU-seconds) of the waiting jobs so far in the queue, per node class.
        self.ahead = [0.0] * len(ctx.state.classes)
        self.lines: dict[tuple[int, ...], _DrainLine] = {}
        # A job with a reservation or a nomination is in the release timeline itself (its GPUs
        # are busy from its start until it has run): its work is not added again.
        self.promised = ctx.reservations
        self.head_quota = _head_quota(ctx)
        # per request size, the quota ETA of a later job of the head's team that would outlast
        # the head's start
        self.after_head: dict[tuple[int, int, float], float | None] = {}
        # Per (team, GPU type): the GPUs its waiting jobs so far in the queue will hold of its
        # quota, when the last of them will have run, and how many jobs they are; and memoised
        # quota ETAs behind them.
        self.quota_ahead: dict[tuple[str, str], tuple[int, float, int]] = {}
        self.quota_etas_ahead: dict[tuple[str, str, int, int, float], float | None] = {}
        # the words per GPU type of jobs over their quota on several (see _word_types)
        self.typed: dict[tuple[object, ...], _Worded] = {}
        # Per class set: the runs (GPUs, start, end) told so far in the queue to jobs that only
        # maintenance keeps waiting, which the later such jobs must leave room for.
        self.after_windows: dict[tuple[int, ...], list[tuple[int, float, float]]] = {}
        self.default_runtime = ctx.config.default_runtime_estimate_s
        # asked for every job along the queue: read once (the calendar's truth is a call)
        self.windows = bool(ctx.calendar)
        self.now = ctx.snapshot.now

    def _timeline(self) -> ReleaseTimeline:
        if self.timeline is None:
            self.timeline = ReleaseTimeline(self.ctx)
        return self.timeline

    # -- per outcome -------------------------------------------------------------------------

    def _line(self, classes: tuple[int, ...]) -> _DrainLine:
        line = self.lines.get(classes)
        if line is None:
            line = self.lines[classes] = _DrainLine(self._timeline(), classes)
        return line

    def word(self, spec: JobSpec, outcome: Outcome) -> _Worded:
        if outcome.type_options and outcome.resolvable:
            return self._word_types(spec, outcome)
        if outcome.elsewhere and outcome.resolvable:
            return self._word_elsewhere(spec, outcome)
        base, code = outcome.eta, outcome.code
        quota_at: float | None = None
        capacity_part: tuple[float | None, bool] | None = None
        preset = None
        quota_code = code is ReasonCode.QUOTA_EXCEEDED
        if (base is None or quota_code) and outcome.resolvable:
            # (a job over quota may come with the time its preemption would start it: then
            # the earlier of that and its quota's time)
            preset = base
            base, quota_at, capacity_part = self._estimate(spec, outcome, base)
            if preset is not None and (base is None or preset < base):
                base, quota_at = preset, None
        elif code in PROTECTED_CODES and outcome.demand is not None:
            # the time its victims' protection lifts (and they stop), unless the GPUs free up
            # earlier by runtime limits anyway
            freed = self._capacity_eta(spec, outcome.demand, outcome.classes, _tried_on(outcome))[0]
            if freed is not None and base is not None and freed < base:
                base = freed
        position_free: str | None = None
        if code is ReasonCode.MAINTENANCE_WINDOW and base is not None and outcome.demand is not None \
                and spec.id not in self.promised:
            outcome, base, position_free = self._elsewhere(spec, outcome, base)
        line: _DrainLine | None = None
        if code in AHEAD_CODES and outcome.demand is not None and outcome.classes:
            line = self._line(outcome.classes)
        # A job over its quota waits for its team's jobs, not for the queue ahead of it (which
        # may run beside it): its capacity term is the release time alone.
        drains = code in CAPACITY_CODES and outcome.eta is None
        return _Worded(
            base, outcome.message, code, REASONS[code], outcome.resolvable,
            outcome.would_start_if, line, drains, _fits_now(outcome),
            outcome.demand.gpus if outcome.demand is not None else 0,
            outcome.eta is None or base != outcome.eta,
            position_free if position_free is not None
            else None if base is None or (quota_at is not None and base > quota_at)
            else _from_runtime_limits(outcome.message, base, outcome.demand),
            quota_at, code in AHEAD_CODES, outcome.quota_type if quota_at is not None else None,
            capacity_part, preset, _charged_type(self.ctx, outcome), (),
            outcome.demand, outcome.classes, outcome.lending_free_at, outcome.lending_words,
            outcome.promised_gpus, outcome.promised_room, outcome.lending_would,
        )

    def _elsewhere(self, spec: JobSpec, outcome: Outcome, reopen: float
                   ) -> tuple[Outcome, float, str | None]:
        """A job that only maintenance keeps waiting: the window's end is when the nodes it
        would use reopen, but other capable nodes, of any GPU type it accepts, may free sooner
        by runtime limits (nodes inside a window count from when they reopen), clear of the
        windows to come during its run. Its outcome then names the classes it would start on,
        its ETA and its sentence with that start."""
        assert outcome.demand is not None
        now = self.ctx.snapshot.now
        best, start = outcome.classes, reopen
        for classes in outcome.type_classes or (outcome.classes,):
            freed, fits_now = self._capacity_eta(spec, outcome.demand, classes)
            if fits_now:
                freed = now
            elsewhere = None if freed is None else self._timeline().clear_of_windows(
                outcome.demand, classes, freed, spec.runtime_limit_s)
            if elsewhere is not None and now < elsewhere < start:
                best, start = classes, elsewhere
        if start == reopen:
            return outcome, reopen, None
        where = "" if best == outcome.classes else f" (its {type_names(self.ctx, best)} GPUs)"
        return outcome._replace(classes=best), start, (
            f"{outcome.message} Estimated start t={start:.0f}: capable GPUs clear of the "
            f"maintenance free up on other nodes{where} then (by runtime limits).")

    def _word_types(self, spec: JobSpec, outcome: Outcome) -> _Worded:
        """A job over its quota on several GPU types starts on whichever type first has both
        the quota and the GPUs: it is worded once per type, as a job of that type alone
        would be, and :meth:`place` keeps the type with the earliest start (ties: the type it
        prefers; with no start known, the type of its remedy). The sentence of a type other
        than the remedy's says so, and that type's remedy leads its ``would_start_if``, the
        cheapest way after it: until 7 Dec 2026 "It would start first on its a100 GPUs." came
        with "team ml frees 4 h100 GPUs" alone. (Before, only the first type was estimated: a
        job whose a100 quota had room at once was told the start of its h100 quota.)"""
        # Jobs of a team and a gang shape over the same quotas get equal outcomes (each its
        # own object): worded once. (The words depend on the team, not on the rest of the job.)
        key = (spec.team, id(outcome.demand), outcome.eta, outcome.message,
               outcome.would_start_if, outcome.quota_type, outcome.type_options,
               outcome.needs_whole_node)
        found = self.typed.get(key)
        if found is not None:
            return found
        remedy = outcome.quota_type
        alternatives = []
        for gpu_type, classes, own_remedy in outcome.type_options:
            note, would = "", outcome.would_start_if
            if gpu_type != remedy:
                # what it waits for there leads its remedy, then the cheapest way
                note = f" It would start first on its {gpu_type} GPUs."
                would = f"{own_remedy}, or {would}"
            alternatives.append(self.word(spec, outcome._replace(
                message=outcome.message + note, would_start_if=would, quota_type=gpu_type,
                classes=classes, type_options=())))
        fallback = next((w for w in alternatives if w.charged == remedy), alternatives[0])
        found = self.typed[key] = fallback._replace(alternatives=tuple(alternatives))
        return found

    def _word_elsewhere(self, spec: JobSpec, outcome: Outcome) -> _Worded:
        """A job short of room on each GPU type it accepts starts on whichever has room first:
        it is worded once per type, as a job of that type alone would be, and
        :meth:`_place_first_room` keeps the type with the earliest start (ties: the type it
        prefers). The sentence of a type other than its first says so and names the others;
        its ``would_start_if`` leads with that type's condition, the others' after it (any of
        them starts the job)."""
        ctx = self.ctx
        outcomes = (outcome._replace(elsewhere=()), *outcome.elsewhere)
        names = [type_names(ctx, o.classes) for o in outcomes]
        worded = [self.word(spec, outcomes[0])]
        for k in range(1, len(outcomes)):
            o, name = outcomes[k], names[k]
            also = " or ".join(n for i, n in enumerate(names) if i != k)
            would = o.would_start_if
            if o.lending_free_at is None:  # (the promises' words end it: nothing after them)
                would = ", or ".join([would, *(x.would_start_if for i, x in enumerate(outcomes) if i != k)])
            note = f" {o.note}" if o.note else ""
            # (a gang's option its quota split holds each member to one of these types)
            mixing = ", its members on different types" if o.member_classes and "/" in name else ""
            worded.append(self.word(spec, o._replace(
                message=f"{o.message}{FIRST_ON} {name} GPUs{mixing} (it also takes {also}).{note}",
                would_start_if=would)))
        first = set(worded[0].classes)
        return worded[0]._replace(on_types=tuple(worded), on_shared_classes=any(
            first & set(alt.classes) for alt in worded[1:]))

    def _capacity_eta(self, spec: JobSpec, d: Demand, classes: tuple[int, ...],
                      members: tuple[tuple[int, ...], ...] = ()) -> tuple[float | None, bool]:
        """(The first release time at which the gang fits, by the counts; or ``None`` with
        whether it fits now.) A packed heterogeneous gang is placed as well, from the first
        time its counts fit (:meth:`_placed_frame`), each member on its classes of
        ``members`` when given; so is a gang on distinct nodes whose ``members`` are
        narrower than the classes its counts take each member to be capable of (its quota
        split it, ``Outcome.member_classes``)."""
        width = self.ctx.state.widest(classes)
        key = (d.gpus, d.node_needs(width), classes, d.topology, d.distinct_nodes,
               d.members if d.distinct_nodes and len(d.members) > 1 else ())
        found = self.etas.get(key)
        if found is None:
            timeline = self._timeline()
            if d.topology in DOMAIN_TOPOLOGIES:
                # one leaf switch (spine) must have the room: the fleet's counts said a 16-GPU
                # same-leaf gang starts when one node frees on each of two leaves
                frame = timeline.domain_frame(d, classes)
                found = self.etas[key] = (None if not frame else timeline.times[frame], frame == 0)
            else:
                found = self.etas[key] = (timeline.eta(d, classes), timeline.fits_at(d, classes, 0))
        counted_eta, fits_now = found
        if counted_eta is None and not fits_now:
            return found
        placed_on = self._placed_on(d, classes, members)
        if placed_on is None:
            return found
        times = self._timeline().times
        frame = self._placed_frame(spec, d, placed_on,
                                   0 if counted_eta is None else bisect_left(times, counted_eta))
        if frame is None:
            return None, False
        return (None, True) if frame == 0 else (times[frame], False)

    def _placed_on(self, d: Demand, classes: tuple[int, ...], members: tuple[tuple[int, ...], ...]
                   ) -> tuple[tuple[int, ...], ...] | None:
        """The classes of each member a gang is placed on along the release timeline
        (:meth:`_placed_frame`), or ``None`` when its counts alone tell its start. A packed
        heterogeneous gang (:func:`_packed_roles`) is placed on ``members`` (those the cycle
        tries it on, ``Outcome.member_classes``), else each member on the classes of
        ``classes`` it is capable of. A gang on distinct nodes is counted exactly, each member
        on those capable classes (``ReleaseTimeline.node_sets``): placed only when its quota
        narrowed ``members`` (an a100 node freeing at t=1000 for each member was counted for
        a gang whose second member the cycle tries on h100 alone)."""
        if not _packed_roles(d) and not (members and d.distinct_nodes and len(d.members) > 1):
            return None
        wanted = set(classes)
        capable = tuple(tuple(c for c in capable_classes(self.ctx, m) if c in wanted) for m in d.members)
        if _packed_roles(d):
            return members or capable
        return members if members != capable else None

    def _placed_frame(self, spec: JobSpec, d: Demand, member_classes: tuple[tuple[int, ...], ...],
                      first: int) -> int | None:
        """For a gang :meth:`_placed_on` places: the first frame of the release timeline from
        ``first`` (where its counts first fit) at which the placer places it, each member on
        its ``member_classes``
        (:meth:`ReleaseTimeline.placed_frame`; memoised per gang, classes and score plugin).
        The counts pool the classes of all its members and count nodes by their GPUs: until
        7 Dec a trainer of 4 h100 GPUs with a worker of 1 a100 GPU was told t=1000, when an
        a100 node freed, and started at t=2000, when the h100 node had room for the trainer."""
        score = self.ctx.plugins.score_by_workload[spec.workload]
        key = (d, member_classes, score.NAME)
        if key in self.placed:
            return self.placed[key]
        frame = None
        if all(member_classes):
            frame = self._timeline().placed_frame(PlacementRequest(d, member_classes, score), first)
        self.placed[key] = frame
        return frame

    def _estimate(self, spec: JobSpec, outcome: Outcome, base: float | None
                  ) -> tuple[float | None, float | None, tuple[float | None, bool] | None]:
        """(ETA, when its quota has room, the capacity term) for a job short of capacity or
        over its quota: it needs both, so the later of the two, unknown if either is (GPUs
        that never free by runtime limits)."""
        code = outcome.code
        quota_at: float | None = None
        capacity_part: tuple[float | None, bool] | None = None
        capacity_now = False
        d = outcome.demand
        capacity = (code in CAPACITY_CODES or code is ReasonCode.QUOTA_EXCEEDED) and d is not None
        if d is not None and capacity:
            if code is ReasonCode.TOPOLOGY_UNSATISFIED:
                # the counts fit in one domain, the members do not: its next release there
                timeline = self._timeline()
                frame = timeline.domain_frame(d, outcome.classes)
                placed_on = self._placed_on(d, outcome.classes, _tried_on(outcome))
                if frame is not None and placed_on is not None:
                    frame = self._placed_frame(spec, d, placed_on, frame)
                base, capacity_now = None if frame is None else timeline.times[frame], False
            else:
                base, capacity_now = self._capacity_eta(spec, d, outcome.classes, _tried_on(outcome))
            capacity_part = (base, capacity_now)
        if code is ReasonCode.QUOTA_EXCEEDED and outcome.quota_type is not None:
            quota_at = self._quota_time(spec, outcome, outcome.quota_type)
            if quota_at is None or not capacity:
                base = quota_at
            elif base is None:
                base = quota_at if capacity_now else None
            else:
                base = max(base, quota_at)
            if base is None:
                quota_at = None
        return base, quota_at, capacity_part

    def _quota_time(self, spec: JobSpec, outcome: Outcome, quota_type: str) -> float | None:
        """When the team's (or its cohort's) jobs have released the quota this job lacks."""
        ctx = self.ctx
        gpus = outcome.demand.gpus if outcome.demand else spec.gpus
        shortage = ctx.ledger.check(spec.team, quota_type, gpus).shortage(gpus)
        cohort = ctx.ledger.cohort_of(spec.team, quota_type)
        qkey = (spec.team, quota_type, shortage if cohort is None else -gpus)
        if qkey not in self.quota_etas:
            if cohort is None:
                tkey = (spec.team, quota_type)
                if tkey not in self.releases:
                    self.releases[tkey] = team_ends(ctx, *tkey)
                self.quota_etas[qkey] = team_release_eta(ctx, spec.team, quota_type, shortage,
                                                         self.releases[tkey])
            else:
                self.quota_etas[qkey] = cohort_release_eta(ctx, spec.team, quota_type, gpus,
                                                           self.releases, cums=self.cums)
        return self.quota_etas[qkey]

    # -- per job, along the queue --------------------------------------------------------------

    def place(self, spec: JobSpec, w: _Worded, position: int, dry: bool = False) -> PendingExplanation:
        """This job's explanation where it stands in the queue (thousands a cycle: the worded
        outcome is unpacked once, the job's id and promise are read once, and the rarer quota
        terms are calls of their own). ``dry``: what it would be, leaving the work and the
        quota it adds for the jobs behind it uncounted (:meth:`_place_first_room`)."""
        if w.alternatives:
            return self._place_earliest(spec, w, position)
        if w.on_types and not dry:
            return self._place_first_room(spec, w, position)
        (eta, text, code, reason, resolvable, would, line, drains, fits_now, demand_gpus, estimated, _,
         quota_at, adds, quota_type, _, _, charged, _, _, _, lending_free_at, _, _, _, _, _, _) = w
        message = text
        job_id = spec.id
        unpromised = job_id not in self.promised
        runtime = spec.runtime_limit_s or self.default_runtime
        if line is not None:
            eta = self._drain(line, drains, fits_now,
                              demand_gpus * runtime if adds and unpromised and not dry else 0.0, eta)
            if drains and eta is not None and self.after_windows and unpromised:
                # the jobs ahead waiting only for maintenance run once it ends: leave them room
                later = self._room_beside_window_runs(w, eta, runtime)
                if later > eta:
                    eta, estimated = later, True
        elif code is ReasonCode.MAINTENANCE_WINDOW and eta is not None and unpromised:
            eta, estimated = self._after_windows(spec, w, eta, estimated)
            if w.classes:
                # its run is work queued ahead of the later jobs on its classes, as the run
                # of a job waiting for GPUs is
                self._count_ahead(spec, self._line(w.classes), demand_gpus)
        head_quota = self.head_quota
        if quota_type is not None:
            if quota_at is not None and (spec.team, quota_type) in self.quota_ahead:
                eta, message, estimated = self._behind_own_jobs(spec, w, eta, message, estimated, dry)
            if head_quota is not None and spec.team == head_quota[0] \
                    and quota_type == head_quota[1] and not _ends_by_head_from(spec, eta, head_quota):
                eta, message, estimated = self._behind_head(w, eta, message, estimated, head_quota)
        if lending_free_at is not None and eta is not None and lending_free_at > eta:
            # (a start unknown by runtime limits stays unknown: the lending does not free GPUs)
            eta, estimated, message, would = self._beside_promises(spec, w, eta, estimated,
                                                                   message, would)
        if eta is not None and estimated:
            message = _estimated_sentence(w, eta)
        # a task of an array with a task limit: no earlier than its array has a slot for it
        in_array = spec.array_task_limit is not None and resolvable and self._waits_for_slot(spec)
        if in_array:
            eta, message, would = self._array_slot(spec, w, eta, message, would, unpromised)
        if eta is not None and self.windows and unpromised:
            eta, message = self._clear_of_windows(spec, w, eta, message)
        if dry:
            return pending_explanation(job_id, code, reason, message, resolvable, position, eta, would)
        if in_array:
            self.ctx.arrays.take(spec, eta)
        if charged is not None and resolvable and (head_quota is None or job_id != head_quota[4]):
            self._hold_quota_ahead(spec, charged, demand_gpus, eta)
        return pending_explanation(job_id, code, reason, message, resolvable, position, eta, would)

    def _place_first_room(self, spec: JobSpec, w: _Worded, position: int) -> PendingExplanation:
        """:meth:`place` for a job short of room on several GPU types: each type's start as a
        job of that type alone there would be told it (the work queued ahead on that type's
        classes, the maintenance windows on its nodes, its quota's terms), the earliest told
        (ties: the type it prefers; no start known on any: its first type's words). A type
        with GPUs enough now, by their count, whose start cannot be estimated (its CPUs,
        memory or nodes' room short, which runtime limits do not tell) may start it any time:
        it is told that type's words with no start, as a job of that type alone is (told the
        other type's start, a lone job started before it).

        For the jobs behind it, its run still counts as on its first type (its work on that
        type's classes, the quota it will hold, its array's slot), as before: moving it to the
        type told made the ETAs of the jobs of one type behind it worse, and its own less
        good, in forward runs of the 1,000-GPU benchmark fleets (the drain line does not know
        which type's queue a job of several joins)."""
        if spec.array_task_limit is None and not w.on_shared_classes:
            # (a gang's mixed option shares classes with its one-type options: placed first for
            # good, its run on them was work queued ahead of itself there)
            return self._place_first_room_fast(spec, w, position)
        first = w.on_types[0]
        best, start = first, math.inf
        for alt in w.on_types:
            eta = self.place(spec, alt, position, dry=True).eta
            if eta is None and _may_start_any_time(alt):
                best = alt._replace(text=alt.text.replace(FIRST_ON, MAY_START_ON))
                break
            if eta is not None and eta < start:
                best, start = alt, eta
        if best is first:
            return self.place(spec, first, position)
        told = self.place(spec, best, position, dry=True)
        self.place(spec, first, position)
        return told

    def _no_earlier(self, alt: _Worded, start: float) -> bool:
        """Can this type's start be no earlier than ``start``, by its own estimate or by the
        work queued ahead on its classes (the terms :meth:`place` adds after them only
        delay it)?"""
        base = alt.base
        if base is not None and base >= start:
            return True
        line = alt.line
        if line is None or not alt.drains or (base is None and not alt.fits_now):
            return False
        ahead = self.ahead
        work = 0.0
        for c, _ in line.spread:
            work += ahead[c]
        # (the work ahead only grows along the queue: the line's cursor may move on)
        drained = line.drained(work) if work > 0 else None
        return drained is not None and drained >= start

    def _place_first_room_fast(self, spec: JobSpec, w: _Worded, position: int) -> PendingExplanation:
        """:meth:`_place_first_room` for a job of no array (thousands a cycle): its first type
        placed for good at once (a one-type option's classes are its type's alone, so what it
        counts there changes no other type's terms; not so a gang's mixed option, whose
        classes overlap them: :meth:`_place_first_room` then weighs each dry first), and
        another type's start sought only
        where its own estimate is earlier (the later terms only delay it)."""
        told = self.place(spec, w.on_types[0], position)
        start = told.eta
        first = w.on_types[0]
        if start is None and _may_start_any_time(first):
            return told
        for alt in w.on_types[1:]:
            if start is not None and self._no_earlier(alt, start):
                continue
            found = self.place(spec, alt, position, dry=True)
            if found.eta is None and _may_start_any_time(alt):
                return self.place(spec, alt._replace(text=alt.text.replace(FIRST_ON, MAY_START_ON)),
                                  position, dry=True)
            if found.eta is not None and (start is None or found.eta < start):
                told, start = found, found.eta
        return told

    def _waits_for_slot(self, spec: JobSpec) -> bool:
        """Is ``spec`` a task of an array with a task limit that holds no slot of it yet (not
        nominated this cycle)?"""
        return bool(spec.array_id) and not self.ctx.arrays.holds(spec)

    def _array_slot(self, spec: JobSpec, w: _Worded, eta: float | None, message: str, would: str,
                    unpromised: bool) -> tuple[float | None, str, str]:
        """(ETA, sentence, would start if) of a task of an array with a task limit: no earlier
        than its array has a slot for it, the tasks ahead of it in line (in queue order, from
        those holding GPUs) taking theirs first (``ArrayTaskCounts.slot``, the rule the tasks
        its limit left untried are told by). Before any task of a 0-9%3 array ran, all ten
        were told the first start, though only three can run then. A reservation's or a
        nomination's start is the cycle's decision and stays."""
        arrays = self.ctx.arrays
        slot = arrays.slot(spec, self.ctx.ends, self.now)
        if w.code is ReasonCode.ARRAY_TASK_LIMIT:  # its limit is what it waits for: its words say so
            return (slot if slot < math.inf else None), message, would
        if eta is None or slot <= eta or not unpromised:
            return eta, message, would
        limit = spec.array_task_limit or 0
        ahead = arrays.ahead[spec.array_id]
        runs = f"its array runs at most {counted(limit, 'task')} at a time, and"
        would = f"{would}, and a task of its array ahead of it ends"
        if slot == math.inf:  # every slot is held by a task with no end known
            return None, (f"{w.text} No start can be estimated: {runs} {counted(limit, 'task')} of it "
                          f"ahead of this one {verb(limit, 'has', 'have')} no end known by runtime "
                          f"limits."), would
        return slot, (f"{w.text} Estimated start t={slot:.0f}: {runs} the {counted(ahead, 'task')} of "
                      f"it ahead of this one {verb(ahead, 'runs', 'run')} first (by runtime limits)."), would

    def _beside_promises(self, spec: JobSpec, w: _Worded, eta: float, estimated: bool,
                         message: str, would: str) -> tuple[float, bool, str, str]:
        """(ETA, estimated, sentence, would start if) of a job whose GPUs are there at ``eta``,
        before the quota promised to jobs that start before it has room for it for good
        (``w.lending_free_at``): the earliest start from ``eta`` the promises let it take
        (``quota_promises.start_beside_promises``). One that ends before the promised jobs
        start, or whose quota has room for them and it by their starts, starts when its GPUs
        are there, and its sentence says nothing of them; until 5 Dec 2026 it was held to the
        promised jobs' end (told t=14400, it started at t=4000)."""
        assert w.lending_free_at is not None
        base = would.removesuffix(w.lending_would)
        start = None
        if w.promised_gpus is not None:
            gpu_type, gpus = w.promised_gpus
            start = start_beside_promises(self.ctx, spec, gpu_type, gpus, eta, w.lending_free_at,
                                          self.releases, self.cums)
        if start is None:
            return (w.lending_free_at, False,
                    f"{w.text} Estimated start t={w.lending_free_at:.0f}: {w.lending_words}", would)
        if start > eta:
            return (start, False, f"{w.text} Estimated start t={start:.0f}: {w.promised_room} "
                                  f"leaves room for this job only from then (by runtime limits).",
                    f"{base}, and {w.promised_room} leaves it room (from t={start:.0f})")
        assert w.promised_gpus is not None
        before = ends_before(self.ctx, spec, *w.promised_gpus, start)
        if before is None:  # the promises leave it room however long it runs
            return eta, estimated, message, base
        latest = before.start_at - (spec.runtime_limit_s or 0.0)
        return eta, estimated, message, (
            f"{base} by t={latest:.0f}, so that it ends before job {before.job_id} starts at "
            f"t={before.start_at:.0f}; or {base}{w.lending_would}")

    def _hold_quota_ahead(self, spec: JobSpec, charged: str, gpus: int, eta: float | None) -> None:
        """What this job will hold of its team's quota once it starts (``gpus`` of type
        ``charged`` from its ETA to its runtime limit), for the jobs behind it."""
        key = (spec.team, charged)
        found = self.quota_ahead.get(key)
        held, until, jobs = (0, self.now, 0) if found is None else found
        ends_at = math.inf if eta is None else eta + (spec.runtime_limit_s or self.default_runtime)
        self.quota_ahead[key] = (held + gpus, ends_at if ends_at > until else until, jobs + 1)

    def _place_earliest(self, spec: JobSpec, w: _Worded, position: int) -> PendingExplanation:
        """:meth:`place` for a job over its quota on several GPU types: each type's start with
        its quota terms (its team's jobs ahead on that type, the head's reservation on it) and
        clear of the maintenance windows on that type's nodes, the earliest kept; only that
        type's GPUs then count as held for the jobs behind it.
        (A job over quota adds no work to the drain lines, so the types' terms are
        independent.)"""
        head_quota = self.head_quota
        # (the type, its start and sentence, and the same clear of the maintenance windows,
        # which the earliest is chosen by)
        best: tuple[_Worded, float, str, float, str] | None = None
        for alt in w.alternatives:
            # the quota terms and the windows only ever start a job later than its type's own
            # estimate (or make it unknown): a type whose estimate is no earlier cannot win
            if alt.base is None or best is not None and alt.base >= best[3]:
                continue
            eta: float | None = alt.base
            message, estimated = alt.text, alt.estimated
            if alt.quota_type is not None and alt.quota_at is not None \
                    and (spec.team, alt.quota_type) in self.quota_ahead:
                eta, message, estimated = self._behind_own_jobs(spec, alt, eta, message, estimated)
            if alt.quota_type is not None and head_quota is not None \
                    and spec.team == head_quota[0] and alt.quota_type == head_quota[1] \
                    and not _ends_by_head_from(spec, eta, head_quota):
                eta, message, estimated = self._behind_head(alt, eta, message, estimated,
                                                            head_quota)
            if eta is None:
                continue
            if estimated:
                message = _estimated_sentence(alt, eta)
            # a type whose GPUs free first, but on nodes a maintenance window takes during
            # its run, may start later than another: until 7 Dec 2026 the earliest was chosen
            # before the windows, and a job told t=20000 on a100 started at t=5000 on h100
            clear, clear_message = (self._clear_of_windows(spec, alt, eta, message)
                                    if self.windows else (eta, message))
            if best is None or clear < best[3]:
                best = (alt, eta, message, clear, clear_message)
        if best is None:  # no start known on any type: the words of its remedy's type
            alt = w._replace(alternatives=())
            return self.place(spec, alt, position)
        alt, start, message, clear, clear_message = best
        if alt.quota_at is None and alt.preset == start and alt.charged != w.charged:
            # it starts by preemption (its sentence says when), which every type is told: no
            # type's quota starts it first, and the words of its remedy's type name none.
            # (Until 7 Dec 2026 the type it prefers said "It would start first on its a100
            # GPUs." of a job that preempted its team's h100 job.)
            alt = w._replace(alternatives=())
            message = alt.text
            clear, clear_message = (self._clear_of_windows(spec, alt, start, message)
                                    if self.windows else (start, message))
        eta = start
        would = alt.would
        in_array = spec.array_task_limit is not None and self._waits_for_slot(spec)
        if in_array:
            eta, message, would = self._array_slot(spec, alt, eta, message, would,
                                                   spec.id not in self.promised)
            if eta is not None and self.windows:
                eta, message = self._clear_of_windows(spec, alt, eta, message)
        else:
            eta, message = clear, clear_message
        if in_array:
            self.ctx.arrays.take(spec, eta)
        if alt.charged is not None and (head_quota is None or spec.id != head_quota[4]):
            self._hold_quota_ahead(spec, alt.charged, alt.demand_gpus, eta)
        return pending_explanation(spec.id, alt.code, alt.reason, message, alt.resolvable,
                                   position, eta, would)

    def _clear_of_windows(self, spec: JobSpec, w: _Worded, eta: float, message: str
                          ) -> tuple[float, str]:
        """A start estimated from releases alone, moved past the maintenance windows that would
        take the nodes it needs out of service during its run (to its runtime limit). Kept as
        it is when no later time is clear either: that is not for the windows to say."""
        if w.demand is None or not w.classes:
            return eta, message
        timeline = self._timeline()
        clear = timeline.clear_of_windows(w.demand, w.classes, eta, spec.runtime_limit_s)
        if clear is None or clear <= eta:
            return eta, message
        calendar, state = self.ctx.calendar, self.ctx.state
        wanted = set(w.classes)
        end = run_end(eta, spec.runtime_limit_s)
        nodes = [n for n in calendar.closed(eta, end) if state.node_class[n] in wanted]
        windows = calendar.blocking(nodes, eta, end)
        named = ", ".join(x.id for x in windows[:3]) + (", …" if len(windows) > 3 else "")
        return clear, (
            f"{w.text} Estimated start t={clear:.0f}: the capable GPUs would free up by t={eta:.0f}, "
            f"but maintenance ({named}) takes {counted(len(nodes), 'capable node')} out of service "
            + ("during a run from then to its runtime limit." if spec.runtime_limit_s is not None
               else "while it would run from then (it declares no runtime limit)."))

    def _drain(self, line: _DrainLine, drains: bool, fits_now: bool, own: float,
               eta: float | None) -> float | None:
        """The work queued ahead on its classes runs first (back to back); its own work then
        counts for the jobs behind it (``own`` GPU-seconds, 0 when it adds none). (Thousands
        of jobs a cycle: one pass over the line's classes reads the work ahead and adds the
        job's own.)"""
        ahead = self.ahead
        work = 0.0
        for c, share in line.spread:
            work += ahead[c]
            if own:
                ahead[c] += own * share
        if drains and work > 0:
            drained = line.drained(work)
            if drained is not None and (eta is None and fits_now or eta is not None and drained > eta):
                eta = drained
        return eta

    def _count_ahead(self, spec: JobSpec, line: _DrainLine, gpus: int) -> None:
        """Its run (GPUs x runtime limit) is work ahead of the later jobs on the line's classes."""
        work = gpus * (spec.runtime_limit_s or self.default_runtime)
        ahead = self.ahead
        for c, share in line.spread:
            ahead[c] += work * share

    def _after_windows(self, spec: JobSpec, w: _Worded, eta: float, estimated: bool
                       ) -> tuple[float, bool]:
        """A job that only maintenance keeps waiting starts when its nodes reopen (or when GPUs
        clear of the windows free up elsewhere), but the jobs ahead of it that wait on the same
        classes for the same reason take theirs first (:meth:`_room_beside_window_runs`).
        (The drain line's work is not enough here: the GPUs free before the window are no use
        to a run that would overlap it, and two such jobs were told the same start for the one
        node they both need.) Its own run then counts for the jobs behind it.

        Besides those ends it tries the release times between, once the work queued ahead
        of it on its classes (jobs waiting for GPUs, runs of jobs waiting for a window) has
        drained by the drain line: two jobs waiting for one node's window, with another
        node freeing by its runtime limit while the first runs there, start the second on
        that node then (it was told the end of the first one's run)."""
        runtime = spec.runtime_limit_s or self.default_runtime
        drained: float | None = None
        if w.classes:
            line = self._line(w.classes)
            ahead = self.ahead
            work = sum(ahead[c] for c, _ in line.spread)
            drained = line.drained(work) if work > 0 else self.now
        start = self._room_beside_window_runs(w, eta, runtime, drained)
        self.after_windows.setdefault(w.classes, []).append((w.demand_gpus, start, start + runtime))
        return start, estimated or start > eta

    def _room_beside_window_runs(self, w: _Worded, eta: float, runtime: float,
                                 drained: float | None = None) -> float:
        """The first time from ``eta`` at which the free GPUs of the job's classes, less those
        that the jobs ahead of it waiting only for maintenance (on those classes or some of
        them) hold during its run, leave it room: ``eta`` or the end of one of those runs; the
        last of them if none does. The release times between are tried only from
        ``drained`` (when the work queued ahead on its classes has run; ``None``: not at all):
        before then the jobs ahead waiting for GPUs take what frees up first, and a replay
        with daily windows found starts estimated at any release time between later than
        told more often."""
        classes = set(w.classes)
        runs = [run for key, told in self.after_windows.items() if classes.issuperset(key)
                for run in told]
        if not runs:
            return eta
        timeline = self._timeline()
        ends = {end for _, _, end in runs if end > eta}
        if drained is not None and ends:
            times = timeline.times
            ends.update(times[max(bisect_right(times, eta), bisect_left(times, drained)):
                               bisect_left(times, max(ends))])
        candidates = sorted({eta, *ends})
        for t in candidates:
            held = sum(gpus for gpus, begins, ends in runs if begins < t + runtime and ends > t)
            if timeline.free_in(w.classes, t) - held >= w.demand_gpus:
                return t
        return candidates[-1]

    def _behind_own_jobs(self, spec: JobSpec, w: _Worded, eta: float | None, message: str,
                         estimated: bool, dry: bool = False) -> tuple[float | None, str, bool]:
        """Its team's waiting jobs ahead of it on this quota take it first: they hold it from
        now until the last of them has run (by their ETAs and runtime limits). ``dry`` (a
        start weighed, not told: :meth:`_place_first_room`): no search of the quota's times
        is spent on it, and what it finds is not kept (``quota_eta_after_head``)."""
        assert w.quota_type is not None and w.quota_at is not None
        held, until, jobs = self.quota_ahead[(spec.team, w.quota_type)]
        key = (spec.team, w.quota_type, w.demand_gpus, held, until)
        q2 = self.quota_etas_ahead.get(key, -math.inf)
        if q2 == -math.inf:
            q2 = quota_eta_after_head(self.ctx, spec.team, w.quota_type, w.demand_gpus, held, until,
                                      self.releases, self.cums, self.needs, search=not dry)
            if not dry:
                self.quota_etas_ahead[key] = q2
        if q2 is None or q2 > w.quota_at:
            later = q2
            if q2 is not None and w.capacity_part is not None:
                cap_eta, cap_now = w.capacity_part
                later = max(q2, cap_eta) if cap_eta is not None else (q2 if cap_now else None)
            if later is not None and w.preset is not None:
                later = min(later, w.preset)
            return _if_later(w, later, eta, message, estimated,
                             f"its team's quota goes first to {self._jobs_ahead(spec.team, w.quota_type, held, jobs)} "
                             f"(by runtime limits).")
        return eta, message, estimated

    def _jobs_ahead(self, team: str, quota_type: str, held: int, jobs: int) -> str:
        """The team's waiting jobs ahead of a job on this quota, in words: the GPUs they hold of
        it, or, when they need more between them than the team may ever hold at once (they run
        in turn), how many jobs they are and that they fill its quota. Before, a team of 1 a100
        GPU with three 1-GPU jobs ahead of a fourth read "goes first to the 3 a100 GPUs of its
        jobs ahead of it", three times what it could ever hold."""
        most = self.ctx.ledger.most_held(team, quota_type)
        if held <= most:
            return f"the {counted(held, f'{quota_type} GPU')} of its jobs ahead of it in the queue"
        return (f"its {counted(jobs, 'job')} ahead of it in the queue, which fill the "
                f"{counted(most, f'{quota_type} GPU')} it may hold, in turn, until the last of them has run")

    def _behind_head(self, w: _Worded, eta: float | None, message: str, estimated: bool,
                     head_quota: tuple[str, str, int, float, str, float]
                     ) -> tuple[float | None, str, bool]:
        """The head holds its reservation on this team's quota: this job, still running at the
        head's start, must leave it room (the cycle's own rule), so its quota counts the head
        as held from now until the head has run."""
        team, quota_type, head_gpus, head_done, head_id, head_start = head_quota
        # with the team's jobs ahead of it in the queue too: each term alone had room, and
        # two 32-GPU jobs behind a 32-GPU head were both promised the start that only one of
        # them could have beside the head under an 80-GPU ceiling
        held, until, jobs = self.quota_ahead.get((team, quota_type), (0, head_done, 0))
        key = (w.demand_gpus, head_gpus + held, max(head_done, until))
        if key not in self.after_head:
            self.after_head[key] = quota_eta_after_head(
                self.ctx, team, quota_type, w.demand_gpus, key[1], key[2], self.releases,
                self.cums, self.needs)
        also = ""
        if held:
            # (its jobs ahead run in turn: beside the head they can never hold more than the rest)
            also = (f", and the {counted(held, f'{quota_type} GPU')} of its jobs ahead of it in the queue"
                    if head_gpus + held <= self.ctx.ledger.most_held(team, quota_type)
                    else f", and its {counted(jobs, 'job')} ahead of it in the queue in turn")
        return _if_later(w, self.after_head[key], eta, message, estimated,
                         f"its team's quota must also hold job {head_id} from its reservation at "
                         f"t={head_start:.0f} until it has run{also} (by runtime limits).")


def _ends_by_head_from(spec: JobSpec, eta: float | None, head_quota: tuple[str, str, int, float, str, float]
                       ) -> bool:
    """Does the job, started at its estimate, end by its runtime limit before the head's
    reservation starts? (The cycle's backfill asks it of a start now; an ETA is later, and a
    job of 1 h estimated to start 30 min before the head's start still runs then: two such
    jobs of the head's team were both promised a start that the head's quota could not leave
    room for.)"""
    return eta is not None and spec.runtime_limit_s is not None and eta + spec.runtime_limit_s <= head_quota[5]


def _if_later(w: _Worded, later: float | None, eta: float | None, message: str, estimated: bool,
              why: str) -> tuple[float | None, str, bool]:
    """A quota term that starts the job later (or makes its start unknown) replaces the ETA
    and says why; otherwise the job keeps what it had."""
    if later is None or eta is None or later > eta:
        return later, (w.text if later is None else f"{w.text} Estimated start t={later:.0f}: {why}"), False
    return eta, message, estimated


def explain(ctx: CycleContext, queue: Sequence[JobSpec]) -> tuple[PendingExplanation, ...]:
    """One explanation per pending job that was not bound, in queue order.

    Steps per job: the outcome's own ETA (a reservation's or a nomination's start), else, for
    a job over its quota, the time its team's jobs release the quota it lacks, and, for a job
    short of capacity, the first release time at which its gang fits; then the drain term
    (the work queued ahead of it on its node classes, run back to back). A job over its quota
    also needs the GPUs: its ETA is the later of the quota's time and the capacity terms."""
    explainer = _Explainer(ctx)
    worded, place = explainer.worded, explainer.place
    out: list[PendingExplanation] = []
    append = out.append
    bound = ctx.bound
    outcomes = ctx.outcomes
    # 1-based among the jobs still waiting: those this cycle binds are no longer ahead, and
    # jobs that can never run as asked rank after every job that can (before, two of them
    # ahead made a runnable job read position 3 of a queue it led)
    position = 0
    # (each job's outcome is looked up once, here: thousands of jobs a cycle)
    waiting = [(spec, outcomes[spec.id]) for spec in queue if spec.id not in bound]
    never_position = sum([outcome.resolvable for _, outcome in waiting])
    for spec, outcome in waiting:
        if outcome.resolvable:
            position += 1
        else:
            never_position += 1
        w = worded.get(id(outcome))
        if w is None:
            w = worded[id(outcome)] = explainer.word(spec, outcome)
        append(place(spec, w, position if outcome.resolvable else never_position))
    # the queue holds every job in line: when it holds them all, none is out of line
    kept_out = out_of_line(ctx.snapshot.pending) if len(queue) < len(ctx.snapshot.pending) else []
    for spec in kept_out:
        why = OutOfLine(spec)
        # A job waiting for a dependency (held too or not) cannot start until another job
        # starts or ends: no place in the queue describes it, so it has none (its sentence
        # says what it waits for), and no job ranked after it counts it. A held job alone
        # keeps a rank after every job in line (released, it joins the queue at once).
        out_position: int | None = None
        if not spec.waits_on:
            never_position += 1
            out_position = never_position
        append(pending_explanation(spec.id, why.code, REASONS[why.code], why.message, True,
                                   out_position, None, why.would_start_if))
    return tuple(out)


def _head_quota(ctx: CycleContext) -> tuple[str, str, int, float, str, float] | None:
    """The head job over its quota now: (team, GPU type, its GPUs, when it has run, its id,
    its start)."""
    head = ctx.head
    if head is None or head.quota_team is None or head.quota_type is None:
        return None
    head_spec = ctx.reserved_specs[head.job_id]
    return (head.quota_team, head.quota_type, sum(g.gpus for g in head.grants),
            head.start_at + (head_spec.runtime_limit_s or ctx.config.default_runtime_estimate_s),
            head.job_id, head.start_at)


def _estimated_sentence(w: _Worded, eta: float) -> str:
    """The sentence of a job whose ETA is an estimate, saying what it waits for."""
    if w.quota_at is not None and eta > w.quota_at:
        return (f"{w.text} Estimated start t={eta:.0f}: its quota has room from "
                f"t={w.quota_at:.0f}, but the capable GPUs are busy until then (by runtime limits).")
    if eta != w.base:
        return (f"{w.text} Estimated start t={eta:.0f}: the capable GPUs first run the jobs ahead "
                f"of it (by their runtime limits, back to back).")
    if w.position_free is not None:
        return w.position_free
    return _from_runtime_limits(w.text, eta, w.demand)


def _from_runtime_limits(text: str, eta: float, demand: Demand | None) -> str:
    """The sentence of a start estimated from the release times alone."""
    if demand is not None and demand.topology in DOMAIN_TOPOLOGIES:
        where = "leaf switch" if demand.topology is TopologyConstraint.SAME_LEAF else "spine"
        return (f"{text} Estimated start t={eta:.0f}, when one {where} has room for all "
                f"{demand.gpus} (by runtime limits).")
    return f"{text} Estimated start t={eta:.0f} from runtime limits."


def _charged_type(ctx: CycleContext, outcome: Outcome) -> str | None:
    """The governed GPU type a waiting job will charge to its team's quota when it starts:
    its quota's type when over quota, else the one type of its capable classes."""
    if outcome.quota_type is not None:
        return outcome.quota_type
    if outcome.demand is None or not outcome.classes:
        return None
    names = {ctx.state.classes[c].gpu_type.name for c in outcome.classes}
    if len(names) != 1:
        return None
    (name,) = names
    return name if ctx.ledger.governs(name) else None


class _DrainLine:
    """:meth:`ReleaseTimeline.drain` for one class set, for a work total that only grows
    along the queue: a cursor over the frames instead of a search per job (advanced by
    :meth:`drained` along the queue). ``spread`` says how a job's work on these classes is shared among
    them (by their capacity)."""

    __slots__ = ("area", "rates", "times", "cursor", "spread")

    def __init__(self, timeline: ReleaseTimeline, classes: tuple[int, ...]) -> None:
        self.area, self.rates = timeline.integral(classes)
        self.times = timeline.times
        self.cursor = 0
        caps = [(c, timeline.capacity(c)) for c in classes]
        total = sum(cap for _, cap in caps)
        self.spread = tuple((c, cap / total) for c, cap in caps if total > 0 and cap > 0)

    def drained(self, work: float) -> float | None:
        """When ``work`` GPU-seconds queued on these classes have run: ReleaseTimeline.drain
        from the cursor, which only moves forward (the work ahead only grows along the queue)."""
        area = self.area
        i = self.cursor
        last = len(area) - 1
        while i < last and area[i + 1] <= work:
            i += 1
        self.cursor = i
        rate = self.rates[i]
        if rate > 0:
            return self.times[i] + (work - area[i]) / rate
        return self.times[i] if area[i] >= work else None


def _tried_on(outcome: Outcome) -> tuple[tuple[int, ...], ...]:
    """The classes the cycle tried each member of the outcome's gang on
    (``Outcome.member_classes``), when they are those of its ``classes`` (an outcome worded
    on another type's classes keeps its own members' none of); else ``()``. A job of one
    member gets ``()`` at once: only a gang of several is placed on its members' classes
    (:meth:`_Explainer._placed_on`), and the sets were built for each of some 500 outcomes
    worded a cycle."""
    members = outcome.member_classes
    if len(members) < 2:
        return ()
    if len(members) == len(outcome.demand.members if outcome.demand else ()) \
            and {c for cls in members for c in cls} == set(outcome.classes):
        return members
    return ()


def _packed_roles(d: Demand) -> bool:
    """Is ``d`` a heterogeneous gang (roles) of several members that may share nodes? Its
    start is found by placing it along the release timeline, not by the counts alone."""
    return len(d.members) > 1 and not d.distinct_nodes and bool(d.members[0].role)


def _may_start_any_time(w: _Worded) -> bool:
    """A type of a job short of room on several whose GPUs suffice now by their count, its
    start unknown (CPUs, memory or a node's room short): it may start the job any time. Not
    a type its quota refuses: with no time known for its quota, it starts nothing, and
    must neither hide the other types' starts nor stand for one."""
    return w.capacity_part is not None and w.capacity_part[1] and w.code is not ReasonCode.QUOTA_EXCEEDED


def _fits_now(outcome: Outcome) -> bool:
    """Did the release timeline give no ETA because the capacity is there already (the job
    waits behind others), rather than because it never frees up?"""
    return outcome.code is ReasonCode.BEHIND_HIGHER_PRIORITY or outcome.code in PROTECTED_CODES
