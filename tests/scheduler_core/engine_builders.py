"""Fluent builders for engine tests: tiny hand-built clusters, jobs and running jobs.

    make_job("j1").team("ml").gpus(16).per_node(8).obj()
    make_running(make_job("r1").gpus(4)).on("n0", 0, 1, 2, 3).started(0).obj()
    make_cluster().nodes(6, gpus=8).pending(job).at(100).snapshot()

Defaults: priority classes ``low`` (10), ``normal`` (100), ``high`` (1000); GPU types ``a100``
(80 GB), ``a100-40`` (40 GB), ``h100`` (80 GB, throughput 2), ``t4`` (16 GB); nodes of 8
``a100`` GPUs with 64 CPUs and 512 GB, all on leaf ``l0`` under spine ``s0`` unless told.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from scheduler_core import (
    DependencyCondition,
    DependencyWait,
    GangRole,
    GpuPlacement,
    GpuTypeInfo,
    JobSpec,
    MaintenanceWindow,
    NodeInfo,
    NodeState,
    Plan,
    PriorityClassInfo,
    QuotaInfo,
    RunningJob,
    SchedulerConfig,
    Snapshot,
    TeamUsage,
    TopologyConstraint,
    WorkloadClass,
    schedule,
)

DEFAULT_TYPES = (
    GpuTypeInfo("a100", 80, 1.0),
    GpuTypeInfo("a100-40", 40, 1.0),
    GpuTypeInfo("h100", 80, 2.0),
    GpuTypeInfo("t4", 16, 0.3),
)


class JobBuilder:
    def __init__(self, job_id: str) -> None:
        self._f: dict[str, Any] = {
            "id": job_id,
            "team": "ml",
            "priority_class": "normal",
            "gpus": 1,
            "submitted_at": 0.0,
        }

    def _set(self, **kw: Any) -> JobBuilder:
        self._f.update(kw)
        return self

    def team(self, team: str) -> JobBuilder:
        return self._set(team=team)

    def priority(self, name: str) -> JobBuilder:
        return self._set(priority_class=name)

    def gpus(self, n: int) -> JobBuilder:
        return self._set(gpus=n)

    def per_node(self, n: int) -> JobBuilder:
        return self._set(gpus_per_node=n)

    def types(self, *names: str) -> JobBuilder:
        return self._set(gpu_types=tuple(names))

    def min_memory(self, gb: int) -> JobBuilder:
        return self._set(min_gpu_memory_gb=gb)

    def cpus_per_gpu(self, n: int) -> JobBuilder:
        return self._set(cpus_per_gpu=n)

    def memory_per_gpu(self, gb: int) -> JobBuilder:
        return self._set(memory_gb_per_gpu=gb)

    def topology(self, t: TopologyConstraint | str) -> JobBuilder:
        return self._set(topology=TopologyConstraint(t))

    def distinct_nodes(self, on: bool = True) -> JobBuilder:
        return self._set(members_on_distinct_nodes=on)

    def elastic(self, min_gpus: int, max_gpus: int) -> JobBuilder:
        return self._set(min_gpus=min_gpus, max_gpus=max_gpus)

    def resize_cost(self, seconds: float) -> JobBuilder:
        return self._set(resize_cost_s=seconds)

    def limit(self, seconds: float | None) -> JobBuilder:
        return self._set(runtime_limit_s=seconds)

    def checkpoint_every(self, seconds: float) -> JobBuilder:
        return self._set(checkpoint_interval_s=seconds)

    def restart_cost(self, seconds: float) -> JobBuilder:
        return self._set(restart_cost_s=seconds)

    def roles(self, *roles: GangRole) -> JobBuilder:
        return self._set(roles=tuple(roles), gpus=sum(r.count * r.gpus_per_member for r in roles))

    def submitted(self, t: float) -> JobBuilder:
        return self._set(submitted_at=float(t))

    def workload(self, w: WorkloadClass | str) -> JobBuilder:
        return self._set(workload=WorkloadClass(w))

    def serving(self) -> JobBuilder:
        return self.workload(WorkloadClass.SERVING)

    def preempted_times(self, n: int, *, budget_frees_at: float | None = None) -> JobBuilder:
        return self._set(preemptions_in_window=n, preemption_budget_frees_at=budget_frees_at)

    def held(self, by: str, reason: str = "") -> JobBuilder:
        return self._set(held_by=by, hold_reason=reason)

    def after(self, upstream: str, condition: DependencyCondition | str = DependencyCondition.AFTER_OK,
              upstream_state: str = "") -> JobBuilder:
        waits = self._f.get("waits_on", ()) + (
            DependencyWait(upstream, DependencyCondition(condition), upstream_state),)
        return self._set(waits_on=waits)

    def array(self, array_id: str, task_limit: int | None = None) -> JobBuilder:
        return self._set(array_id=array_id, array_task_limit=task_limit)

    def obj(self) -> JobSpec:
        return JobSpec(**self._f)


def make_job(job_id: str) -> JobBuilder:
    return JobBuilder(job_id)


def role(name: str, count: int, gpus_per_member: int, *types: str, min_memory: int = 0) -> GangRole:
    return GangRole(name, count, gpus_per_member, tuple(types), min_memory)


class RunningBuilder:
    def __init__(self, spec: JobSpec | JobBuilder) -> None:
        self._spec = spec.obj() if isinstance(spec, JobBuilder) else spec
        self._placements: list[GpuPlacement] = []
        self._f: dict[str, Any] = {"started_at": 0.0}

    def on(self, node: str, *gpus: int, role: str = "") -> RunningBuilder:
        self._placements.append(GpuPlacement(node, tuple(gpus), role))
        return self

    def whole(self, *nodes: str, width: int = 8) -> RunningBuilder:
        for node in nodes:
            self.on(node, *range(width))
        return self

    def started(self, t: float) -> RunningBuilder:
        self._f["started_at"] = float(t)
        return self

    def borrowed(self, flag: bool = True) -> RunningBuilder:
        self._f["borrowed"] = flag
        return self

    def checkpointed(self, t: float) -> RunningBuilder:
        self._f["last_checkpoint_at"] = float(t)
        return self

    def terminating(self) -> RunningBuilder:
        self._f["terminating"] = True
        return self

    def generation(self, g: int) -> RunningBuilder:
        self._f["generation"] = g
        return self

    def obj(self) -> RunningJob:
        gpus = sum(len(p.gpu_indices) for p in self._placements)
        spec = self._spec
        if not spec.roles and spec.min_gpus is None and spec.gpus != gpus:
            spec = replace(spec, gpus=gpus)
        return RunningJob(spec=spec, placements=tuple(self._placements), **self._f)


def make_running(spec: JobSpec | JobBuilder) -> RunningBuilder:
    return RunningBuilder(spec)


class ClusterBuilder:
    def __init__(self) -> None:
        self._nodes: list[NodeInfo] = []
        self._types: list[GpuTypeInfo] = list(DEFAULT_TYPES)
        self._classes: list[PriorityClassInfo] = [
            PriorityClassInfo("low", 10),
            PriorityClassInfo("normal", 100),
            PriorityClassInfo("high", 1000),
        ]
        self._quotas: list[QuotaInfo] = []
        self._pending: list[JobSpec] = []
        self._running: list[RunningJob] = []
        self._usage: list[TeamUsage] = []
        self._maintenance: list[MaintenanceWindow] = []
        self._now = 0.0

    def nodes(self, count: int, *, gpus: int = 8, gpu_type: str = "a100", prefix: str = "n",
              start: int = 0, leaf: str = "l0", spine: str = "s0", pool: str = "main",
              cpus: int = 64, memory_gb: int = 512, state: NodeState = NodeState.READY,
              failure_domain: str = "", per_leaf: int | None = None,
              leaves_per_spine: int | None = None) -> ClusterBuilder:
        """``count`` nodes named ``{prefix}{start}``...; with ``per_leaf`` they fill leaves
        ``{leaf}-0``, ``{leaf}-1``... (and spines ``{spine}-k`` with ``leaves_per_spine``)."""
        for k in range(count):
            leaf_name, spine_name = leaf, spine
            if per_leaf:
                leaf_index = k // per_leaf
                leaf_name = f"{leaf}-{leaf_index}"
                if leaves_per_spine:
                    spine_name = f"{spine}-{leaf_index // leaves_per_spine}"
            self._nodes.append(NodeInfo(
                name=f"{prefix}{start + k}", pool=pool, gpu_type=gpu_type, gpus=gpus, cpus=cpus,
                memory_gb=memory_gb, leaf=leaf_name, spine=spine_name, state=state,
                failure_domain=failure_domain,
            ))
        return self

    def node(self, name: str, **kw: Any) -> ClusterBuilder:
        fields: dict[str, Any] = {"pool": "main", "gpu_type": "a100", "gpus": 8, "cpus": 64,
                                  "memory_gb": 512, "leaf": "l0", "spine": "s0"}
        fields.update(kw)
        self._nodes.append(NodeInfo(name=name, **fields))
        return self

    def gpu_type(self, name: str, memory_gb: int, throughput: float = 1.0) -> ClusterBuilder:
        self._types = [t for t in self._types if t.name != name] + [
            GpuTypeInfo(name, memory_gb, throughput)]
        return self

    def priority(self, name: str, value: int, **kw: Any) -> ClusterBuilder:
        self._classes = [c for c in self._classes if c.name != name] + [
            PriorityClassInfo(name, value, **kw)]
        return self

    def quota(self, team: str, gpu_type: str, nominal: int, *, borrowing_limit: int | None = None,
              lending_limit: int | None = None, cohort: str | None = None) -> ClusterBuilder:
        self._quotas.append(QuotaInfo(team, gpu_type, nominal, borrowing_limit, lending_limit,
                                      cohort))
        return self

    def pending(self, *jobs: JobSpec | JobBuilder) -> ClusterBuilder:
        self._pending.extend(j.obj() if isinstance(j, JobBuilder) else j for j in jobs)
        return self

    def running(self, *jobs: RunningJob | RunningBuilder) -> ClusterBuilder:
        self._running.extend(j.obj() if isinstance(j, RunningBuilder) else j for j in jobs)
        return self

    def usage(self, team: str, gpu_seconds: float = 0.0, cpu_seconds: float = 0.0,
              memory_gb_seconds: float = 0.0, as_of: float | None = None) -> ClusterBuilder:
        self._usage.append(TeamUsage(team, gpu_seconds, cpu_seconds, memory_gb_seconds,
                                     self._now if as_of is None else as_of))
        return self

    def maintenance(self, window_id: str, *nodes: str, start: float, end: float,
                    reason: str = "") -> ClusterBuilder:
        self._maintenance.append(MaintenanceWindow(window_id, nodes, float(start), float(end),
                                                   reason))
        return self

    def at(self, now: float) -> ClusterBuilder:
        self._now = float(now)
        return self

    def snapshot(self) -> Snapshot:
        return Snapshot(
            now=self._now,
            nodes=tuple(self._nodes),
            gpu_types=tuple(self._types),
            priority_classes=tuple(self._classes),
            quotas=tuple(self._quotas),
            pending=tuple(self._pending),
            running=tuple(self._running),
            team_usage=tuple(self._usage),
            maintenance=tuple(self._maintenance),
        )

    def plan(self, config: SchedulerConfig | None = None) -> Plan:
        return schedule(self.snapshot(), config)


def make_cluster() -> ClusterBuilder:
    return ClusterBuilder()


# ------------------------------------------------------------------------- reading plans


def bound(plan: Plan) -> dict[str, tuple[GpuPlacement, ...]]:
    return {b.job_id: b.placements for b in plan.binds}


def bound_nodes(plan: Plan, job_id: str) -> list[str]:
    return sorted({p.node for p in bound(plan)[job_id]})


def gpu_count(placements: Iterable[GpuPlacement]) -> int:
    return sum(len(p.gpu_indices) for p in placements)


def why(plan: Plan, job_id: str) -> Any:
    matches = [p for p in plan.pending if p.job_id == job_id]
    assert len(matches) == 1, f"{job_id} explained {len(matches)} times: {plan.pending}"
    return matches[0]


def preempted(plan: Plan) -> list[str]:
    return sorted(p.job_id for p in plan.preemptions)
