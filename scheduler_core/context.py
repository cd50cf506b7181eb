"""The working data of one cycle, shared by the phase functions.

Everything here is built from the snapshot at the start of :func:`scheduler_core.schedule` and
dropped at its end; nothing survives between cycles. Phases read and extend it in a fixed
order, so the plan is a pure function of (snapshot, config).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler_core.array_limit import ArrayTaskCounts
from scheduler_core.gang import Demand, Member
from scheduler_core.maintenance import MaintenanceCalendar
from scheduler_core.outcome import Outcome
from scheduler_core.placement import PlacementRequest, Placer
from scheduler_core.plugins.registry import Plugins
from scheduler_core.quota import QuotaLedger
from scheduler_core.state import ClusterState, Grant
from scheduler_core.types import (
    Bind,
    BorrowingChange,
    GpuTypeInfo,
    GrowthNote,
    JobSpec,
    Kill,
    Preemption,
    PriorityClassInfo,
    Reservation,
    Resize,
    RunningJob,
    SchedulerConfig,
    Snapshot,
)
from scheduler_core.victims import VictimIndex

if TYPE_CHECKING:
    from scheduler_core.quota_promises import QuotaPromise

ShapeKey = tuple[Demand, tuple[tuple[int, ...], ...], str, bool, frozenset[int]]
"""(gang, allowed node classes per member, score plugin, may use reserved GPUs, nodes closed
to its run by maintenance windows)."""


@dataclass(frozen=True, slots=True)
class ActiveReservation:
    """The head job's promise (EASY backfill): these grants, at ``start_at``."""

    job_id: str
    start_at: float
    grants: tuple[Grant, ...]
    quota_team: str | None = None
    """Set when the head is over its quota now and the reservation counts on its own team's
    running jobs releasing enough ``quota_type`` GPUs by ``start_at``."""
    quota_type: str | None = None


@dataclass(slots=True)
class CycleContext:
    snapshot: Snapshot
    config: SchedulerConfig
    plugins: Plugins
    state: ClusterState
    ledger: QuotaLedger
    placer: Placer
    gpu_types: dict[str, GpuTypeInfo]
    priority: dict[str, PriorityClassInfo]
    running: dict[str, RunningJob]
    shares: dict[str, float]
    calendar: MaintenanceCalendar
    arrays: ArrayTaskCounts
    clock: Callable[[], float] | None = None
    # expected end of every holder that will release its GPUs at a known time
    ends: dict[str, float] = field(default_factory=dict)
    killed: dict[str, Kill] = field(default_factory=dict)
    preempted: dict[str, Preemption] = field(default_factory=dict)
    resized: dict[str, Resize] = field(default_factory=dict)
    growth_notes: dict[str, GrowthNote] = field(default_factory=dict)
    borrowing: tuple[BorrowingChange, ...] = ()
    """Running jobs the cycle counts borrowed, or within quota, otherwise than their snapshot."""
    bound: dict[str, Bind] = field(default_factory=dict)
    bound_specs: dict[str, JobSpec] = field(default_factory=dict)
    reservations: dict[str, Reservation] = field(default_factory=dict)
    reserved_specs: dict[str, JobSpec] = field(default_factory=dict)
    """The request of every job in ``reservations``."""
    head: ActiveReservation | None = None
    head_request: PlacementRequest | None = None
    """The head's gang while its reservation may move to other GPUs with the same start
    (``backfill.starts_on_time``); ``None`` for a head over its quota now, which never moves."""
    head_needs_whole: bool = False
    head_maintenance: Outcome | None = None
    """The head's ``MaintenanceWindow`` reason when only maintenance keeps it from starting
    now; worded with its reservation once the cycle's reservations are final
    (``head_reservation.word_maintenance_head``)."""
    reservation_moves: int = 0
    """Moves of the head's reservation tried this cycle (``max_reservation_moves``)."""
    quota_promises: dict[str, QuotaPromise] = field(default_factory=dict)
    """Per job promised GPUs at a later start (the head, a nominated preemptor): what its
    team's quota must still hold for it then (``quota_promises.promise_quota``)."""
    claimed_terminating: set[str] = field(default_factory=set)
    nominated: dict[int, int] = field(default_factory=dict)
    """Per node, the mask of GPUs promised to nominated jobs (their victims' and claimed
    stopping jobs' GPUs included): a reservation planned later never counts them as freed."""
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    failed_shapes: dict[ShapeKey, bool] = field(default_factory=dict)
    capable: dict[Member, tuple[int, ...]] = field(default_factory=dict)
    shapes: dict[tuple[object, ...], Any] = field(default_factory=dict)
    """Admission facts per request shape (``job_shape.JobShape``)."""
    quota_never: dict[tuple[str, str, int], bool] = field(default_factory=dict)
    never_memo: dict[tuple[object, ...], str | None] = field(default_factory=dict)
    largest_domains: dict[tuple[int, tuple[int, ...]], int] = field(default_factory=dict)
    """The most GPUs one leaf switch (spine) holds of a class set (``admission._largest_domain``)."""
    shape_facts: dict[object, Any] = field(default_factory=dict)
    shape_frames: dict[tuple[object, ...], tuple[int, tuple[int, ...], Demand]] = field(
        default_factory=dict)
    """(node size, sizes, smallest demand) per request shape without CPUs and memory per GPU
    (``job_shape.new_shape``); jobs without roles only."""
    release_groups: tuple[int, list[tuple[float, list[str]]]] | None = None
    """``backfill._release_groups`` and the size of ``ends`` it was built from."""
    """Admission facts per (shape without CPUs and memory per GPU, capable classes)."""
    node_sizes: dict[tuple[tuple[str, ...], int], int] = field(default_factory=dict)
    untried_outcomes: dict[tuple[str, int], Outcome] = field(default_factory=dict)
    """Outcome of jobs past the placement-attempt cap, per (team, ``JobShape.gang``)."""
    gangs: dict[tuple[object, ...], int] = field(default_factory=dict)
    behind_head: set[ShapeKey] = field(default_factory=set)
    head_released: bool = False
    victim_hint: tuple[int | None, bool, bool] | None = None
    stopping: list[tuple[int, str, frozenset[int]]] | None = None
    team_holders: tuple[int, dict[str, list[str]]] = field(default_factory=lambda: (0, {}))
    """Keys of ``ends`` per team, and how many keys of ``ends`` that covers
    (``quota_release.team_holders``)."""
    victims: VictimIndex | None = None
    """Running jobs indexed for preemption searches (``victims.VictimIndex``)."""
    reclaim_waits: dict[tuple[str, str | None], str] = field(default_factory=dict)
    """Per job and GPU type on which it waits rather than reclaim its lent quota
    (``preemption._cheaper_to_wait``): the sentence saying why, added to its explanation when
    it is about that type."""
    reclaim_explained: dict[str, str | None] = field(default_factory=dict)
    """Per job that may be told why its lent quota is not reclaimed, the GPU type of the option
    its reason explains; the note (``reclaim_waits``) is added once the cycle's reservations
    are final (``cycle._add_reclaim_notes``)."""
    own_promise_ends: dict[tuple[str, str], tuple[tuple[int, int, int, int], list[tuple[float, int]]]] = \
        field(default_factory=dict)
    """``quota_release.team_ends`` per team and GPU type for ``quota_promises.quota_promised``,
    with the lengths of ``ends``, ``preempted``, ``resized`` and ``killed`` it was read at."""
    attempts: int = 0
    preemption_searches: int = 0
    reservation_searches: int = 0
    untried: int = 0
    durations: dict[str, float] = field(default_factory=dict)

    def timed(self, phase: str, start: float | None) -> float | None:
        """Add the time since ``start`` to ``phase``; returns the new start."""
        if self.clock is None or start is None:
            return None
        now = self.clock()
        self.durations[phase] = self.durations.get(phase, 0.0) + (now - start)
        return now

    def tick(self) -> float | None:
        return self.clock() if self.clock is not None else None

    def priority_value(self, spec: JobSpec) -> int:
        pc = self.priority.get(spec.priority_class)
        return pc.value if pc is not None else 0
