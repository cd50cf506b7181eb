"""Read the fleet and the queue from the database into the engine's frozen Snapshot.

This module translates; it decides nothing. Alongside the snapshot it returns the identifiers
the commit needs to turn the plan's names back into rows (node names → ids, job ids → their
live allocation and generation).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Prefetch

import scheduler_core as engine
from controlplane.choices import LIVE_ALLOCATION_STATES, AllocationState, JobState
from controlplane.models import (
    Allocation,
    AllocationGpu,
    GpuType,
    Job,
    Node,
    PriorityClass,
    Project,
    Quota,
    Team,
)


@dataclass(frozen=True)
class LiveAllocation:
    allocation_id: int
    generation: int
    gpus: int


@dataclass
class SnapshotContext:
    """What the commit needs besides the snapshot itself."""

    snapshot: engine.Snapshot
    read_at: datetime
    node_ids: dict[str, int] = field(default_factory=dict)
    live_allocations: dict[str, LiveAllocation] = field(default_factory=dict)
    grace_by_job: dict[str, int] = field(default_factory=dict)
    team_ids: dict[str, int] = field(default_factory=dict)


def to_seconds(at: datetime) -> float:
    return at.timestamp()


def scheduler_config() -> engine.SchedulerConfig:
    qm = settings.QM
    placement = qm.get("PLACEMENT_POLICY", "pack")
    by_workload = {
        engine.WorkloadClass.TRAINING: placement,
        engine.WorkloadClass.BATCH: placement,
        engine.WorkloadClass.INTERACTIVE: placement,
        engine.WorkloadClass.SERVING: "spread",
    }
    return engine.SchedulerConfig(
        fair_share_half_life_s=float(qm["FAIR_SHARE_HALF_LIFE_S"]),
        placement_by_workload=by_workload,
        max_placement_attempts=int(qm.get("MAX_PLACEMENTS_PER_CYCLE", 4096)),
    )


def job_spec(job: Job, team: str, priority_class: PriorityClass, project: str) -> engine.JobSpec:
    roles = tuple(
        engine.GangRole(
            name=str(role["name"]),
            count=int(role["count"]),
            gpus_per_member=int(role["gpus_per_member"]),
            gpu_types=tuple(role.get("gpu_types", ())),
            min_gpu_memory_gb=int(role.get("min_gpu_memory_gb", 0)),
            cpus_per_gpu=int(role.get("cpus_per_gpu", 0)),
            memory_gb_per_gpu=int(role.get("memory_gb_per_gpu", 0)),
        )
        for role in (job.roles or [])
    )
    return engine.JobSpec(
        id=str(job.pk),
        team=team,
        priority_class=priority_class.name,
        gpus=job.gpus,
        submitted_at=to_seconds(job.submitted_at),
        project=project,
        workload=engine.WorkloadClass(job.workload),
        gpus_per_node=job.gpus_per_node,
        gpu_types=tuple(job.gpu_types or ()),
        min_gpu_memory_gb=job.min_gpu_memory_gb,
        cpus_per_gpu=job.cpus_per_gpu,
        memory_gb_per_gpu=job.memory_gb_per_gpu,
        topology=engine.TopologyConstraint(job.topology),
        min_gpus=job.min_gpus,
        max_gpus=job.max_gpus,
        runtime_limit_s=float(job.runtime_limit_s),
        checkpoint_interval_s=float(job.checkpoint_interval_s) if job.checkpoint_interval_s else None,
        roles=roles,
        user=str(job.submitter_id or ""),
    )


def _preemptions_in_window(job: Job, pc: PriorityClass, now: datetime) -> int:
    """The job keeps a count and the time of its last preemption, not every timestamp: a job
    whose last preemption fell outside its class's budget window has a fresh budget."""
    if not job.preemption_count or job.last_preempted_at is None:
        return 0
    if job.last_preempted_at < now - timedelta(seconds=pc.budget_window_s):
        return 0
    return job.preemption_count


def read_snapshot(now: datetime, epoch: int) -> SnapshotContext:
    """One consistent read of everything a cycle needs (a handful of queries, no N+1)."""
    gpu_types = {g.pk: g for g in GpuType.objects.all()}
    priority_classes = {p.pk: p for p in PriorityClass.objects.all()}
    teams = {t.pk: t for t in Team.objects.select_related("cohort")}
    nodes = list(Node.objects.all().order_by("name"))
    context = SnapshotContext(
        snapshot=engine.Snapshot(now=to_seconds(now), nodes=(), gpu_types=(), priority_classes=(), quotas=(),
                                 pending=(), running=()),
        read_at=now,
        node_ids={n.name: n.pk for n in nodes},
        team_ids={t.name: t.pk for t in teams.values()},
    )
    node_names = {n.pk: n.name for n in nodes}
    project_names = _project_names()

    pending = []
    for job in Job.objects.filter(state=JobState.PENDING).order_by("submitted_at", "id"):
        pc = priority_classes[job.priority_class_id]
        spec = job_spec(job, teams[job.team_id].name, pc, project_names.get(job.project_id, ""))
        pending.append(_with_budget(spec, _preemptions_in_window(job, pc, now)))
        context.grace_by_job[spec.id] = pc.grace_period_s

    running = []
    live = (
        Allocation.objects.filter(state__in=LIVE_ALLOCATION_STATES)
        .select_related("job")
        .prefetch_related(Prefetch("gpus", queryset=AllocationGpu.objects.filter(live=True).order_by("node_id", "gpu_index")))
        .order_by("generation")
    )
    for allocation in live:
        job = allocation.job
        pc = priority_classes[job.priority_class_id]
        spec = _with_budget(
            job_spec(job, teams[job.team_id].name, pc, project_names.get(job.project_id, "")),
            _preemptions_in_window(job, pc, now),
        )
        per_node: dict[int, list[int]] = {}
        for gpu in allocation.gpus.all():
            per_node.setdefault(gpu.node_id, []).append(gpu.gpu_index)
        placements = tuple(
            engine.GpuPlacement(node=node_names[node_id], gpu_indices=tuple(indices))
            for node_id, indices in sorted(per_node.items(), key=lambda item: node_names[item[0]])
        )
        started = allocation.started_at or allocation.created_at
        running.append(
            engine.RunningJob(
                spec=spec,
                placements=placements,
                started_at=to_seconds(started),
                borrowed=allocation.borrowed,
                last_checkpoint_at=to_seconds(job.last_checkpoint_at) if job.last_checkpoint_at else None,
                generation=allocation.generation,
                terminating=allocation.state == AllocationState.RELEASING,
            )
        )
        context.live_allocations[spec.id] = LiveAllocation(
            allocation.pk, allocation.generation, sum(len(i) for i in per_node.values())
        )
        context.grace_by_job[spec.id] = pc.grace_period_s

    context.snapshot = engine.Snapshot(
        now=to_seconds(now),
        epoch=epoch,
        nodes=tuple(
            engine.NodeInfo(
                name=n.name,
                pool=n.pool,
                gpu_type=gpu_types[n.gpu_type_id].name,
                gpus=n.gpu_count,
                cpus=n.cpus,
                memory_gb=n.memory_gb,
                leaf=n.leaf_switch,
                spine=n.spine,
                state=engine.NodeState(n.state),
                capacity_tier=n.capacity_tier,
                failure_domain=n.leaf_switch,
            )
            for n in nodes
        ),
        gpu_types=tuple(
            engine.GpuTypeInfo(name=g.name, memory_gb=g.memory_gb, throughput=g.relative_throughput)
            for g in sorted(gpu_types.values(), key=lambda g: g.name)
        ),
        priority_classes=tuple(
            engine.PriorityClassInfo(
                name=p.name,
                value=p.value,
                preemptible=p.preemptible,
                may_preempt_lower=p.may_preempt_lower,
                grace_period_s=p.grace_period_s,
                min_runtime_s=p.min_runtime_s,
                preemption_budget=p.preemption_budget,
                budget_window_s=p.budget_window_s,
            )
            for p in sorted(priority_classes.values(), key=lambda p: p.name)
        ),
        quotas=tuple(
            engine.QuotaInfo(
                team=teams[q.team_id].name,
                gpu_type=gpu_types[q.gpu_type_id].name,
                nominal_gpus=q.nominal_gpus,
                borrowing_limit=q.borrowing_limit,
                lending_limit=q.lending_limit,
                cohort=teams[q.team_id].cohort.name if teams[q.team_id].cohort else None,
            )
            for q in Quota.objects.order_by("team_id", "gpu_type_id")
        ),
        pending=tuple(pending),
        running=tuple(running),
        team_usage=tuple(
            engine.TeamUsage(
                team=t.name,
                gpu_seconds=t.decayed_gpu_seconds,
                cpu_seconds=t.decayed_cpu_seconds,
                memory_gb_seconds=t.decayed_memory_gb_seconds,
                as_of=to_seconds(t.usage_as_of) if t.usage_as_of else to_seconds(now),
            )
            for t in sorted(teams.values(), key=lambda t: t.name)
        ),
    )
    return context


def _with_budget(spec: engine.JobSpec, in_window: int) -> engine.JobSpec:
    if spec.preemptions_in_window == in_window:
        return spec
    return replace(spec, preemptions_in_window=in_window)


def _project_names() -> dict[int, str]:
    return dict(Project.objects.values_list("pk", "name"))
