"""A small fleet, its teams and one API client per role, shared by the API and CLI tests.

Fleet: 4 nodes × 8 H100-80GB (two leaf switches under spine-1) and 2 nodes × 8 A100-40GB
(leaf-c under spine-2); 96 CPUs and 1,024 GB per node. Teams `ml` (alice) and `vision` (bob)
in one cohort; `finn` is finance; `root` is an admin; an agent holds its node's token.
Passwords equal usernames.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rest_framework.test import APIClient

from controlplane.choices import Role
from controlplane.models import GpuType, Node, PriorityClass, Project, Team
from tests.controlplane import factories as f

AGENT_TOKEN = "agent-token-of-h100-0-not-a-user-token"
ROLES = ["anonymous", "owner", "other_team", "finance", "admin", "agent"]
GENEROUS_THROTTLE_RATES = {"user": "10000000/hour", "login": "1000000/minute"}


@dataclass
class Fleet:
    h100: GpuType
    a100: GpuType
    nodes: list[Node]
    research: PriorityClass
    production: PriorityClass
    ml: Team
    vision: Team
    llm: Project
    users: dict[str, Any]


def build_fleet() -> Fleet:
    h100 = f.make_gpu_type("H100-80GB", 80)
    a100 = f.make_gpu_type("A100-40GB", 40)
    nodes = [
        f.make_agent_node(h100, AGENT_TOKEN, name="h100-0", pool="h100", leaf_switch="leaf-a", spine="spine-1"),
        f.make_node(h100, name="h100-1", pool="h100", leaf_switch="leaf-a", spine="spine-1"),
        f.make_node(h100, name="h100-2", pool="h100", leaf_switch="leaf-b", spine="spine-1"),
        f.make_node(h100, name="h100-3", pool="h100", leaf_switch="leaf-b", spine="spine-1"),
        f.make_node(a100, name="a100-0", pool="a100", leaf_switch="leaf-c", spine="spine-2"),
        f.make_node(a100, name="a100-1", pool="a100", leaf_switch="leaf-c", spine="spine-2"),
    ]
    research = f.make_priority_class("research", 100, default_runtime_limit_s=4 * 3600, max_runtime_limit_s=7 * 86400)
    production = f.make_priority_class("production", 1000, preemptible=False, default_runtime_limit_s=86400,
                                       max_runtime_limit_s=30 * 86400)
    cohort = f.make_cohort("all")
    ml = f.make_team("ml", cohort=cohort, default_priority_class=research)
    vision = f.make_team("vision", cohort=cohort, default_priority_class=production)
    llm = f.make_project(ml, "llm")
    f.make_quota(ml, h100, 16)
    f.make_quota(vision, h100, 16)
    f.make_price_rate(h100, "2.5000")
    users = {
        "owner": f.make_user("alice", team=ml),
        "other_team": f.make_user("bob", team=vision),
        "finance": f.make_user("finn", role=Role.FINANCE),
        "admin": f.make_user("root", role=Role.ADMIN),
    }
    return Fleet(h100, a100, nodes, research, production, ml, vision, llm, users)


def client_for(fleet: Fleet, role: str) -> APIClient:
    client = APIClient()
    if role == "agent":
        client.credentials(HTTP_AUTHORIZATION=f"Token {AGENT_TOKEN}")
    elif role != "anonymous":
        client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(fleet.users[role])}")
    return client
