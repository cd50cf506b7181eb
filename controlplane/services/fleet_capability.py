"""Could this job ever run on this fleet? Asked at submit time, so an impossible shape gets a 400
naming the field instead of waiting forever as `CanNeverRun`.

This module only reads the fleet (grouped by node shape, one query); the decision is the
engine's: `scheduler_core.capability.never_runs` cuts the job into gang members exactly as the
scheduler will and checks *necessary* conditions for placing that gang on the empty fleet, so
a rejection is never wrong. Every node counts whatever its state: a cordoned or down node may
come back, and the fleet "can ever give" its GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from controlplane.models import GpuType, Node, Quota
from scheduler_core.capability import Infeasible, NodeShape, never_runs
from scheduler_core.capability import never_under_quota as engine_never_under_quota
from scheduler_core.types import GpuTypeInfo, JobSpec, QuotaInfo

__all__ = ["Infeasible", "NodeShape", "check", "fleet", "never_under_quota"]


_FLEET_SQL = """
    SELECT t.name, t.memory_gb, t.relative_throughput,
           n.gpu_count, n.cpus, n.memory_gb, n.leaf_switch, n.spine, count(n.id)
    FROM {gpu_type} t LEFT JOIN {node} n ON n.gpu_type_id = t.id AND n.state <> 'retired'
    GROUP BY t.id, n.gpu_count, n.cpus, n.memory_gb, n.leaf_switch, n.spine
"""


def fleet() -> tuple[list[NodeShape], dict[str, GpuTypeInfo]]:
    """The fleet grouped by identical node shape, and every known GPU type (with nodes or not),
    in one query: a few dozen rows even for thousands of nodes. Plain SQL: it runs on every
    submit, and compiling the equivalent ORM aggregate costs more than running it."""
    sql = _FLEET_SQL.format(gpu_type=GpuType._meta.db_table, node=Node._meta.db_table)
    shapes: list[NodeShape] = []
    types: dict[str, GpuTypeInfo] = {}
    with connection.cursor() as cursor:
        cursor.execute(sql)
        rows = cursor.fetchall()
    for name, memory, throughput, gpus, cpus, memory_gb, leaf, spine, count in rows:
        info = types.setdefault(name, GpuTypeInfo(name, memory, throughput))
        if count:
            shapes.append(NodeShape(info, gpus, cpus, memory_gb, leaf, spine, count))
    return shapes, types


def check(spec: JobSpec, shapes: Sequence[NodeShape], gpu_types: dict[str, GpuTypeInfo]) -> Infeasible | None:
    """The first reason the fleet can never run `spec`, or None: the engine's own check
    (`scheduler_core.capability.never_runs`, see its steps), on the grouped fleet."""
    return never_runs(spec, shapes, gpu_types)


def never_under_quota(spec: JobSpec, shapes: Sequence[NodeShape], gpu_types: dict[str, GpuTypeInfo]) -> Infeasible | None:
    """Why the team's quotas could never admit `spec`, though the fleet could run it, or None:
    the engine's judgement (`scheduler_core.capability.never_under_quota`, the cycle's
    `CanNeverRun` over quota) on the whole quota table, one query (the cohort's other teams'
    quotas are what it may lend). Asked by the submit form's live check only: a submit takes
    such a job, since an admin may raise the quota while it waits."""
    quotas = [
        QuotaInfo(team=q.team.name, gpu_type=q.gpu_type.name, nominal_gpus=q.nominal_gpus,
                  borrowing_limit=q.borrowing_limit, lending_limit=q.lending_limit,
                  cohort=q.team.cohort.name if q.team.cohort is not None else None)
        for q in Quota.objects.select_related("team__cohort", "gpu_type")
    ]
    return engine_never_under_quota(spec, shapes, gpu_types, quotas)
