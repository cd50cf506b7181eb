"""Rows the page tests store: cycle samples and lost-work events, with the demo fleet's sizes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from controlplane.models import Event, FleetSample, Job, PriorityClass, Team
from controlplane.services import accounting
from controlplane.services.cycle import run_cycle


def sample(at: datetime, **fields: Any) -> FleetSample:
    """One stored cycle sample, with the demo fleet's 128 GPUs and whatever `fields` set."""
    values: dict[str, Any] = {
        "at": at, "epoch": 1, "total_gpus": 128, "allocated_gpus": 64, "stranded_gpus": 3,
        "pending_jobs": 2, "running_jobs": 5, "pending_by_priority": {"research": 2},
        "pending_by_team": {"vision": 2}, "largest_free_block_by_pool": {"h100": 8, "a100": 4},
        "dominant_share_by_team": {"vision": 0.25, "language": 0.125}, "oldest_feasible_pending_s": 600.0,
    }
    values.update(fields)
    return FleetSample.objects.create(**values)


def preempted_event(job: Job, at: datetime, lost_gpu_seconds: float, kind: str = "job.preempted") -> Event:
    return Event.objects.create(created_at=at, kind=kind, actor="test", reason="Preempted", job=job,
                                team_id=job.team_id, data={"lost_gpu_seconds": lost_gpu_seconds})


def team(name: str) -> Team:
    return Team.objects.get(name=name)


def priority(name: str) -> PriorityClass:
    return PriorityClass.objects.get(name=name)


def both_teams_ran_for(submit_as: Any, hours: float) -> datetime:
    """vision (alice) and language (bob) each hold 8 H100 from `hours` ago until now, with the
    rollups caught up; returns now."""
    now = timezone.now()
    submit_as("alice", name="v", gpus=8, gpu_types=("H100-80GB",))
    submit_as("bob", name="l", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test", now=now - timedelta(hours=hours))
    accounting.catch_up(now)
    return now
