"""Builders shared by the control-loop and node-agent tests.

A small fleet for the loop: GPU type H100-80GB, team `ml` with room for everything, priority
class `research` (grace 5 s). Nodes are registered through the agent protocol itself, so they
carry real tokens; `bind` places a job exactly where a test wants it, through the same
transition the scheduler's commit uses.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone
from rest_framework.test import APIClient

import scheduler_core as engine
from controlplane.models import Allocation, Cohort, GpuType, Job, Node, PriorityClass, Quota, Team
from controlplane.services import agent_protocol, cycle, reconcile, transitions
from controlplane.services.snapshot import read_snapshot, scheduler_config

BOOTSTRAP = "bootstrap-secret-for-tests"


@dataclass
class LoopFleet:
    h100: GpuType
    team: Team
    research: PriorityClass


def build_loop_fleet(*, grace_period_s: int = 5, quota: int = 10_000) -> LoopFleet:
    h100 = GpuType.objects.get_or_create(name="H100-80GB", defaults={"memory_gb": 80})[0]
    cohort = Cohort.objects.get_or_create(name="all")[0]
    research = PriorityClass.objects.get_or_create(
        name="research", defaults={"value": 500, "grace_period_s": grace_period_s}
    )[0]
    team = Team.objects.get_or_create(name="ml", defaults={"cohort": cohort, "default_priority_class": research})[0]
    Quota.objects.get_or_create(team=team, gpu_type=h100, defaults={"nominal_gpus": quota})
    return LoopFleet(h100=h100, team=team, research=research)


def inventory(**overrides: Any) -> agent_protocol.Inventory:
    fields: dict[str, Any] = {
        "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96, "memory_gb": 1024,
        "leaf_switch": "leaf-1", "spine": "spine-1", "simulated": True,
    }
    fields.update(overrides)
    return agent_protocol.Inventory(**fields)


def register_node(name: str, *, now: datetime | None = None, **overrides: Any) -> tuple[Node, str]:
    """Register a node through the protocol; returns it and its agent token."""
    registration = agent_protocol.register(
        name, inventory(**overrides), token=BOOTSTRAP, running=[], now=now or timezone.now()
    )
    return registration.node, registration.token


def make_job(fleet: LoopFleet, *, gpus: int = 1, name: str = "job", **kw: Any) -> Job:
    at = kw.pop("submitted_at", None) or timezone.now()
    fields: dict[str, Any] = {"runtime_limit_s": 3600}
    fields.update(kw)
    return Job.objects.create(
        team=fleet.team, priority_class=fleet.research, name=name, gpus=gpus, submitted_at=at, state_changed_at=at,
        **fields,
    )


def bind(job: Job, placement: Mapping[Node, Sequence[int]], *, at: datetime | None = None) -> Allocation:
    """Bind `job` to exactly these GPUs, as the leader's commit does (lease row locked)."""
    from django.db import transaction

    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        allocation = transitions.bind_job(
            job.pk,
            [transitions.GpuSet(node_id=node.pk, gpu_indices=list(gpus)) for node, gpus in placement.items()],
            lease=lease, borrowed=False, at=at or timezone.now(), actor="test",
        )
    assert allocation is not None
    return allocation


def agent_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def plan_binding(job: Job) -> tuple[engine.Plan, Any, Any]:
    """A cycle's read and plan, not yet committed, binding `job` alone: (plan, context, lease).
    A test changes something between this and `commit_planned` to race the commit."""
    lease = cycle.acquire_lease("worker-1", timezone.now())
    assert lease is not None
    context = read_snapshot(timezone.now(), lease.epoch)
    plan = engine.schedule(context.snapshot, scheduler_config())
    assert [b.job_id for b in plan.binds] == [str(job.pk)]
    return plan, context, lease


def commit_planned(plan: engine.Plan, context: Any, lease: Any) -> cycle.CycleResult:
    """The commit of `plan_binding`'s plan, as the cycle commits (a CycleResult)."""
    return cycle.commit_plan(plan, context, holder=lease.holder, epoch=lease.epoch, plan_ms=0.0,
                             started=time.perf_counter())
