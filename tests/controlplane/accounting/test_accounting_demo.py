"""The demo fleet, end to end: simulated node agents speaking the real protocol to a live server,
the real scheduling cycle and a mix of the demo's jobs; the accounting rollup shows non-zero,
ordered tiers (allocated > active ≥ productive > 0) within a minute."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db.models import Sum
from django.utils import timezone

from controlplane.agent.client import AgentClient
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory
from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import FleetRollup, PriorityClass, Team
from controlplane.services import accounting, cycle
from tests.controlplane import factories as f

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
BOOTSTRAP = "bootstrap-secret-for-accounting-demo"


def agent(server: str, name: str, tier: str) -> NodeAgent:
    inventory = NodeInventory(name=name, gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=96, memory_gb=1024,
                              leaf_switch="leaf-h1", spine="spine-1", capacity_tier=tier, simulated=True)
    return NodeAgent(inventory, client=AgentClient(server), launcher=SimulatedLauncher(), bootstrap_token=BOOTSTRAP,
                     interval_s=0.2, sample_interval_s=0.5)


def fleet_tiers() -> dict[str, float]:
    sums = FleetRollup.objects.filter(bucket=accounting.MINUTE).aggregate(
        allocated=Sum("allocated_gpu_seconds"), active=Sum("active_gpu_seconds"),
        productive=Sum("productive_gpu_seconds"), cost=Sum("cost_usd"))
    return {k: float(v or 0) for k, v in sums.items()}


def test_demo_fleet_shows_non_zero_ordered_tiers_within_a_minute(live_server: Any, settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    seed_demo_fleet(with_nodes=False)
    agents = [agent(live_server.url, "demo-h100-a", "reserved"), agent(live_server.url, "demo-h100-b", "on_demand")]
    # Shapes and simulated behaviour as the demo's stream submits them (controlplane/demo_stream.py).
    research = PriorityClass.objects.get(name="research")
    for team, gpus, steps, activity in (("vision", 4, 5, 0.62), ("language", 8, 10, 0.9), ("vision", 1, 2, 0.75)):
        f.make_job(Team.objects.get(name=team), research, gpus=gpus, runtime_limit_s=600, checkpoint_interval_s=30,
                   env={"QM_SIM_DURATION_S": "120", "QM_SIM_STEPS_PER_S": str(steps),
                        "QM_SIM_TOKENS_PER_STEP": "4096", "QM_SIM_ACTIVITY": str(activity)})
    started = time.monotonic()
    tiers: dict[str, float] = {}
    while time.monotonic() - started < 60:
        for a in agents:
            a.step()
        cycle.run_cycle("accounting-demo")
        accounting.roll_up(timezone.now())
        tiers = fleet_tiers()
        if tiers["productive"] > 0 and tiers["allocated"] > tiers["active"]:
            break
        time.sleep(0.2)
    assert tiers["allocated"] > tiers["active"] >= tiers["productive"] > 0, tiers
    assert tiers["cost"] > 0
    assert time.monotonic() - started < 60
