"""Phase 1: order the queue.

The queue-order plugin gives each pending job a key from its priority class, its team's
dominant share (:mod:`scheduler_core.fairshare`) and its age; ties fall to submission time and
then job id, so the order is total and the same snapshot always yields the same order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from scheduler_core.context import CycleContext
from scheduler_core.eligibility import in_line
from scheduler_core.errors import SnapshotError
from scheduler_core.fairshare import dominant_shares, fair_shares_of
from scheduler_core.gang import is_elastic
from scheduler_core.job_shape import shape_key, shape_of
from scheduler_core.plugins.protocols import QueueContext, QueueOrderPlugin
from scheduler_core.plugins.registry import build_plugins
from scheduler_core.state import FLEET, ClusterState
from scheduler_core.types import JobSpec, Queued, QueueSnapshot, SchedulerConfig, Snapshot


def order_queue(ctx: CycleContext) -> list[JobSpec]:
    _check_ids(ctx)
    pending = ctx.snapshot.pending
    values = {name: pc.value for name, pc in ctx.priority.items()}
    keyed, _ = _sorted_keys(pending, ctx.plugins.queue_order, ctx.snapshot.now, values, ctx.shares)
    # (each key ends in the job's index, an int: read without typing.cast, a call per job)
    return [pending[k[-1]] for k in keyed]  # type: ignore[index]


def widest_fitting_gangs_first(ctx: CycleContext, queue: list[JobSpec]) -> list[JobSpec]:
    """``queue`` with, among tied jobs (equal ``tie_key``), the rigid gangs of whole nodes that
    the whole nodes free at the cycle's start could hold put widest first, in the places those
    gangs had; every other job keeps its place, and equally wide gangs keep their order.

    First-fit decreasing over the cycle's free whole nodes: of two tied gangs that each fit
    but not together, the one started first leaves the other waiting until enough whole nodes
    free again. A narrower gang needs fewer of them, so it finds room sooner, and meanwhile
    the wider one keeps more GPUs busy. Shortest-first, the order's tie-break for the mean
    wait, gains little there: the gang left over waits for nodes to free whichever starts. A
    gang that does not fit the free whole nodes keeps its place. Whether a gang fits is
    counted, not searched: at least as many fully free ready nodes of the classes of one of
    its GPU type options as it has members. Judged once, before any job of the cycle is
    decided (judged again at each gang's turn instead, the seed weeks lost goals: see
    docs/engine.md, *Benchmarks*)."""
    if not ctx.config.widest_gang_first or len(queue) < 2:
        return queue
    whole_free = _whole_free_nodes(ctx.state)
    if not any(whole_free):
        return queue
    smallest_node = min(c.gpus for c in ctx.state.classes)
    fits_of_shape: dict[tuple[object, ...], bool] = {}  # many jobs share a shape
    fitting = []
    for i, spec in enumerate(queue):
        if spec.gpus < smallest_node:
            continue
        key = shape_key(spec)
        fits = fits_of_shape.get(key)
        if fits is None:
            fits = fits_of_shape[key] = _fits_on_whole_nodes(ctx, spec, whole_free)
        if fits:
            fitting.append(i)
    if len(fitting) < 2:
        return queue
    tie_key = ctx.plugins.queue_order.tie_key
    values = {name: pc.value for name, pc in ctx.priority.items()}
    now = ctx.snapshot.now
    contexts: dict[tuple[str, str], QueueContext] = {}
    ties = []
    for i in fitting:
        spec = queue[i]
        qctx = contexts.get((spec.priority_class, spec.team))
        if qctx is None:
            qctx = contexts[(spec.priority_class, spec.team)] = QueueContext(
                now, values.get(spec.priority_class, 0), ctx.shares.get(spec.team, 0.0))
        ties.append(tie_key(spec, qctx))
    out = list(queue)
    first = 0
    for last in range(1, len(fitting) + 1):
        if last < len(fitting) and ties[last] == ties[first]:
            continue
        places = fitting[first:last]
        widths = [queue[i].gpus for i in places]
        if any(a < b for a, b in zip(widths, widths[1:], strict=False)):
            # sorted() is stable: equally wide gangs keep the order's tie-break
            for place, spec in zip(places, sorted((queue[i] for i in places),
                                                  key=lambda s: -s.gpus), strict=True):
                out[place] = spec
        first = last
    return out


def _whole_free_nodes(state: ClusterState) -> list[int]:
    """Per node class, its ready nodes with every GPU free."""
    buckets = state.buckets
    counts = []
    for node_class in state.classes:
        by_free = buckets.get((FLEET, 0, node_class.id))
        counts.append(len(by_free[node_class.gpus]) if by_free is not None else 0)
    return counts


def _fits_on_whole_nodes(ctx: CycleContext, spec: JobSpec, whole_free: list[int]) -> bool:
    """Is ``spec`` a rigid gang of whole nodes with enough fully free nodes for its members
    on the classes of one of its GPU type options?"""
    if is_elastic(spec):
        return False
    shape = shape_of(ctx, spec)
    if not shape.needs_whole or shape.invalid is not None or shape.never is not None \
            or shape.not_ready is not None:
        return False
    members = len(shape.smallest.members)
    for option in shape.options:
        if all(option.member_classes) and sum(
                whole_free[c] for c in ctx.placer.union(option.member_classes)) >= members:
            return True
    return False


@dataclass(frozen=True, slots=True)
class QueueFactors:
    """What places one waiting job in the queue, as Slurm's ``sprio`` shows it: its class's
    value and the points waiting added (``effective_priority`` is their sum: higher goes
    first), its team's dominant share (lower goes first among equal priorities), then its
    runtime limit (shorter first, under ``priority_fair_share``) and submission time.
    ``order`` is its 1-based place among the jobs in line; held jobs and jobs waiting for a
    dependency are not in line."""

    job_id: str
    order: int
    priority_class: str
    class_value: int
    aging_points: float
    effective_priority: float
    team: str
    team_share: float
    runtime_limit_s: float | None
    submitted_at: float


def queue_factors(snapshot: Snapshot, config: SchedulerConfig | None = None) -> tuple[QueueFactors, ...]:
    """The jobs in line in the order phase 1 gives them, each with the factors of its place:
    the same plugin, shares and keys as :func:`order_queue`, without the rest of a cycle."""
    cfg = config if config is not None else SchedulerConfig()
    shares = dominant_shares(snapshot.now, snapshot.nodes, snapshot.running, snapshot.team_usage,
                             cfg.fair_share_half_life_s)
    values = {pc.name: pc.value for pc in snapshot.priority_classes}
    return _factors(snapshot.now, snapshot.pending, values, shares, cfg)


def queue_factors_of(queue: QueueSnapshot, config: SchedulerConfig | None = None) -> tuple[QueueFactors, ...]:
    """:func:`queue_factors` of the snapshot ``queue`` was read from: the same jobs, order and
    factors, from only what the order depends on (its jobs' fields the keys read, the shares'
    sums), so a reader of the queue alone need not read the fleet and its running jobs."""
    cfg = config if config is not None else SchedulerConfig()
    shares = {team: share.dominant_share for team, share in fair_shares_of(
        queue.now, queue.capacity, queue.held, queue.team_usage, cfg.fair_share_half_life_s).items()}
    return _factors(queue.now, queue.pending, queue.priority_values, shares, cfg)


def _factors(now: float, pending: Sequence[Queued], values: Mapping[str, int], shares: Mapping[str, float],
             config: SchedulerConfig) -> tuple[QueueFactors, ...]:
    plugin = build_plugins(config).queue_order
    keyed, contexts = _sorted_keys(pending, plugin, now, values, shares)
    out = []
    for order, key in enumerate(keyed, start=1):
        job = pending[cast(int, key[-1])]
        qctx = contexts[(job.priority_class, job.team)]
        effective = plugin.effective_priority(job, qctx)
        out.append(QueueFactors(job.id, order, job.priority_class, qctx.priority_value,
                                effective - qctx.priority_value, effective, job.team, qctx.dominant_share,
                                job.runtime_limit_s, job.submitted_at))
    return tuple(out)


def _sorted_keys(pending: Sequence[Queued], plugin: QueueOrderPlugin, now: float, values: Mapping[str, int],
                 shares: Mapping[str, float]
                 ) -> tuple[list[tuple[float | str | int, ...]], dict[tuple[str, str], QueueContext]]:
    """The jobs in line as sort keys in queue order, each ending in the job's index in
    ``pending``, and the plugin's context per (priority class, team)."""
    keyed: list[tuple[float | str | int, ...]] = []
    lengths: set[int] = set()
    sort_key = plugin.sort_key
    # one QueueContext per (priority class, team): it holds nothing job-specific
    qctxs: dict[tuple[str, str], QueueContext] = {}
    for index, job in enumerate(pending):
        if not in_line(job):
            continue
        qkey = (job.priority_class, job.team)
        qctx = qctxs.get(qkey)
        if qctx is None:
            qctx = qctxs[qkey] = QueueContext(now, values.get(job.priority_class, 0),
                                              shares.get(job.team, 0.0))
        key = sort_key(job, qctx)
        lengths.add(len(key))
        # numeric ids in numeric order (job 9 before job 10: an array's tasks share their
        # submission time and run in index order, as Slurm's do)
        keyed.append(key + (job.submitted_at, len(job.id), job.id, index))
    # The order is (key, submitted_at, id by length then text). One flat tuple per job sorts
    # about twice as fast as nested ones and gives the same order when all keys have one length, as the built-in
    # plugins' keys do. Job ids are unique (order_queue checks them): no comparison reaches the index.
    if len(lengths) > 1:
        keyed.sort(key=lambda k: (k[:-4], k[-4:]))
    else:
        keyed.sort()
    return keyed, qctxs


def _check_ids(ctx: CycleContext) -> None:
    """Pending job ids are unique and none is running. Checked with set operations first
    (thousands of jobs a cycle); only a failing snapshot is walked job by job, so the error
    names the first offending job in queue order."""
    ids = [job.id for job in ctx.snapshot.pending]
    if len(set(ids)) == len(ids) and ctx.running.keys().isdisjoint(ids):
        return
    seen: set[str] = set()
    for job_id in ids:
        if job_id in seen:
            raise SnapshotError(f"pending job {job_id!r} appears twice in the snapshot")
        if job_id in ctx.running:
            raise SnapshotError(
                f"job {job_id!r} is both pending and running; a job is in exactly one of them"
            )
        seen.add(job_id)
