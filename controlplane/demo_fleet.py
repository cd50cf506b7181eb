"""The demo fleet: two pools, three teams in one cohort, four priority classes, a price table,
and the demo users. Seeds a fresh database once: running it again changes nothing, and never
brings back a record someone renamed or deleted since (renaming team `language` to `lang-ai`
and restarting the demo made a second `language`, with bob in both). The seed leaves a
`config.changed` event (reason DemoSeeded) in the audit trail; a database without it that holds
a fleet already (seeded by an earlier version) counts as seeded too.

Demo only: the users' passwords are their names.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from controlplane.choices import CapacityTier, EventKind, NodeState, Role
from controlplane.models import (
    Cohort,
    Event,
    GpuType,
    Membership,
    Node,
    PriceRate,
    PriorityClass,
    Project,
    Quota,
    Team,
)
from controlplane.services import config_audit

PRICES_FROM = datetime(2026, 1, 1, tzinfo=UTC)

GPU_TYPES = [("H100-80GB", 80, 1.0), ("A100-40GB", 40, 0.45)]
PRICES = {
    "H100-80GB": {CapacityTier.RESERVED: "2.50", CapacityTier.ON_DEMAND: "4.10", CapacityTier.SPOT: "1.90"},
    "A100-40GB": {CapacityTier.RESERVED: "1.10", CapacityTier.ON_DEMAND: "1.90", CapacityTier.SPOT: "0.80"},
}
PRIORITY_CLASSES = [
    # name, value, preemptible, may_preempt_lower, grace, min_runtime, budget, default_limit, max_limit
    ("production", 1000, False, True, 60, 0, 0, 4 * 3600, 30 * 86400),
    ("research", 500, True, True, 30, 300, 3, 4 * 3600, 7 * 86400),
    ("batch", 200, True, False, 30, 120, 5, 2 * 3600, 3 * 86400),
    # A scavenger runs 30 s (one checkpoint interval of the demo's jobs) before it may be
    # preempted: with none, the job just bound was always the cheapest victim (the least work
    # since a checkpoint) and every arriving research job took it, the same job bound and
    # preempted again and again (up to 5 times a minute in the demo, 5 Dec). Slurm's
    # PreemptExemptTime does the same. Its budget, 10 a day, still lets it go often.
    ("best-effort", 10, True, False, 10, 30, 10, 1 * 3600, 86400),
]
TEAMS = {
    # team: (default priority class, projects, quota per GPU type (nominal, borrowing limit))
    "vision": ("research", ["detector", "segmentation"], {"H100-80GB": (40, 32), "A100-40GB": (8, 8)}),
    "language": ("research", ["llm-pretrain", "eval"], {"H100-80GB": (32, 48), "A100-40GB": (16, 8)}),
    "serving": ("production", ["inference"], {"H100-80GB": (24, 8), "A100-40GB": (8, 0)}),
}
# The classes each team's members may submit in (Team.priority_classes; a team not named: every
# class): the research teams never production, which is serving's, never preempted.
TEAM_CLASSES = {"vision": ["research", "batch", "best-effort"], "language": ["research", "batch", "best-effort"]}
USERS = [
    ("admin", None, Role.ADMIN),
    ("alice", "vision", Role.MEMBER),
    ("bob", "language", Role.MEMBER),
    ("finn", None, Role.FINANCE),
]


def demo_nodes() -> list[dict[str, object]]:
    nodes: list[dict[str, object]] = []
    for i in range(12):
        nodes.append({
            "name": f"h100-{i + 1:02d}", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96,
            "memory_gb": 1024, "leaf_switch": f"leaf-h{i // 4 + 1}", "spine": "spine-1",
            "capacity_tier": CapacityTier.RESERVED if i < 8 else CapacityTier.ON_DEMAND,
        })
    for i in range(4):
        nodes.append({
            "name": f"a100-{i + 1:02d}", "pool": "a100", "gpu_type": "A100-40GB", "gpu_count": 8, "cpus": 64,
            "memory_gb": 512, "leaf_switch": "leaf-a1", "spine": "spine-2", "capacity_tier": CapacityTier.SPOT,
        })
    return nodes


SEEDED_REASON = "DemoSeeded"


def already_seeded() -> bool:
    """The demo seeded this database before (its event), or it holds a fleet already."""
    return (Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason=SEEDED_REASON).exists()
            or Team.objects.exists() or GpuType.objects.exists() or PriorityClass.objects.exists())


@transaction.atomic
def seed_demo_fleet(*, with_nodes: bool = True, awaiting_agents: bool = False) -> None:
    """``awaiting_agents``: the nodes are seeded down until their agents register (the demo
    starts real agent processes). Seeded ready, the reconciler marked each one suspect, "its
    agent never registered", seconds before it registered: two false events per node at every
    demo start. Tests without agents keep them ready."""
    if already_seeded():
        return
    with config_audit.changing_users("demo"):  # each demo user's UserCreated event names the seed
        _seed(with_nodes, awaiting_agents)
    Event.objects.create(
        created_at=timezone.now(), kind=EventKind.CONFIG_CHANGED, actor="demo", reason=SEEDED_REASON,
        message="Demo fleet seeded (teams, GPU types, prices, priority classes, quotas and demo users); "
                "the demo seeds a database once and leaves later changes as they are.",
    )


def _seed(with_nodes: bool, awaiting_agents: bool = False) -> None:
    gpu_types = {}
    for name, memory, throughput in GPU_TYPES:
        gpu_types[name], _ = GpuType.objects.get_or_create(
            name=name, defaults={"memory_gb": memory, "relative_throughput": throughput}
        )
        for tier, price in PRICES[name].items():
            PriceRate.objects.get_or_create(
                gpu_type=gpu_types[name], capacity_tier=tier, effective_from=PRICES_FROM,
                defaults={"usd_per_gpu_hour": Decimal(price)},
            )
    classes = {}
    for name, value, preemptible, may_preempt, grace, min_rt, budget, default_limit, max_limit in PRIORITY_CLASSES:
        classes[name], _ = PriorityClass.objects.get_or_create(
            name=name,
            defaults={
                "value": value, "preemptible": preemptible, "may_preempt_lower": may_preempt, "grace_period_s": grace,
                "min_runtime_s": min_rt, "preemption_budget": budget, "default_runtime_limit_s": default_limit,
                "max_runtime_limit_s": max_limit,
            },
        )
    cohort, _ = Cohort.objects.get_or_create(name="shared-fleet", defaults={"description": "All demo teams"})
    for team_name, (default_class, projects, quotas) in TEAMS.items():
        team, created = Team.objects.get_or_create(
            name=team_name, defaults={"cohort": cohort, "default_priority_class": classes[default_class]}
        )
        if created and team_name in TEAM_CLASSES:
            team.priority_classes.set([classes[name] for name in TEAM_CLASSES[team_name]])
        for project in projects:
            Project.objects.get_or_create(team=team, name=project)
        for gpu_type, (nominal, borrowing) in quotas.items():
            Quota.objects.get_or_create(
                team=team, gpu_type=gpu_types[gpu_type],
                defaults={"nominal_gpus": nominal, "borrowing_limit": borrowing},
            )
    user_model = get_user_model()
    for username, team_name, role in USERS:
        user = user_model.objects.filter(username=username).first()
        if user is None:  # made with its password: a password set after would be a UserPasswordChanged event
            user = user_model.objects.create_user(username, email=f"{username}@example.com", password=username,
                                                  is_staff=role == Role.ADMIN, is_superuser=role == Role.ADMIN)
        team = Team.objects.get(name=team_name) if team_name else None
        Membership.objects.get_or_create(user=user, team=team, defaults={"role": role})
    if with_nodes:
        for spec in demo_nodes():
            Node.objects.get_or_create(
                name=spec["name"],
                defaults={**{k: v for k, v in spec.items() if k not in {"name", "gpu_type"}},
                          "gpu_type": gpu_types[str(spec["gpu_type"])], "simulated": True,
                          **({"state": NodeState.DOWN} if awaiting_agents else {})},
            )
