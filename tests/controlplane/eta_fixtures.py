"""The one-node fleet the ETA tests share: one 8-GPU H100 node, team `ml` whose default class
is `research`, and jobs submitted straight into the queue at a given time."""

from __future__ import annotations

from datetime import datetime

from controlplane.models import GpuType, Job, Node, PriorityClass, Team


def one_node_team() -> Team:
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    Node.objects.create(name="n0", pool="h100", gpu_type=h100, gpu_count=8, cpus=96, memory_gb=1024,
                        leaf_switch="leaf-0", spine="spine-0")
    research = PriorityClass.objects.create(name="research", value=100, grace_period_s=30)
    return Team.objects.create(name="ml", default_priority_class=research)


def submit(team: Team, name: str, limit_s: int, at: datetime, gpus: int = 8) -> Job:
    return Job.objects.create(team=team, name=name, priority_class=team.default_priority_class, gpus=gpus,
                              runtime_limit_s=limit_s, submitted_at=at, state_changed_at=at)
