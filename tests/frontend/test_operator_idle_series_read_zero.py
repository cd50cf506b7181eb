"""A GPU type nobody uses, and a team that holds nothing, read 0 on /metrics: not no series.

Found on the operator's walk (7 Dec): with the A100 pool cordoned and nothing running there,
`quartermaster_gpus_allocated` had no `gpu_type="A100-40GB"` series at all, so the allocation
ratio `quartermaster_gpus_allocated / quartermaster_gpus_capacity` dropped that type instead
of reading 0, and an alert on a pool allocated below some share never fired exactly when it
was allocated nothing; `quartermaster_quota_usage_gpus` likewise had no series for a team with
quota that held nothing (the serving team of the demo), so "how much of its guarantee does each
team use" left out the teams using none of it. `qm quotas` and the API said 0 for both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.models import Node, PriorityClass, Quota, Team
from controlplane.services import nodes
from controlplane.services.cycle import run_cycle
from tests.frontend.metrics_series import series


def test_operator_a_gpu_type_allocated_nothing_reads_0_beside_its_capacity(
    client_for: Callable[[str], Client], submit_as: Any,
) -> None:
    admin_user = get_user_model().objects.get(username="admin")
    for node in Node.objects.filter(pool="a100"):
        nodes.cordon(node, admin_user)
    submit_as("alice", name="small", gpus=2, gpu_types=("H100-80GB",))
    run_cycle("test")
    admin = client_for("admin")

    allocated = series(admin, "quartermaster_gpus_allocated")
    capacity = series(admin, "quartermaster_gpus_capacity")

    assert set(allocated) == set(capacity)  # a ratio of the two has every GPU type
    assert allocated == {(("gpu_type", "A100-40GB"),): 0.0, (("gpu_type", "H100-80GB"),): 2.0}


def test_operator_a_team_holding_nothing_reads_0_for_each_of_its_quotas(
    client_for: Callable[[str], Client], submit_as: Any,
) -> None:
    submit_as("alice", name="small", gpus=2, gpu_types=("H100-80GB",))
    run_cycle("test")

    usage = series(client_for("admin"), "quartermaster_quota_usage_gpus")

    def key(team: str, gpu_type: str) -> tuple[tuple[str, str], ...]:
        cohort = Team.objects.get(name=team).cohort
        return (("cohort", cohort.name if cohort else ""), ("gpu_type", gpu_type), ("team", team))

    quotas = {key(q.team.name, q.gpu_type.name) for q in Quota.objects.select_related("team", "gpu_type")}
    assert quotas <= set(usage)  # every quota's usage has a series, held or not
    assert usage[key("vision", "H100-80GB")] == 2.0
    assert usage[key("vision", "A100-40GB")] == 0.0
    assert usage[key("serving", "H100-80GB")] == 0.0


def test_operator_an_empty_queue_reads_0_pending_for_every_team_class_and_status(
    client_for: Callable[[str], Client],
) -> None:
    """Found on the operator's review of /metrics (7 Dec): with nothing waiting,
    `quartermaster_pending_jobs` had no series at all, so a queue-depth graph read "No data"
    and the alert on inadmissible jobs could not tell an empty queue from a broken scrape."""
    admin = client_for("admin")

    pending = series(admin, "quartermaster_pending_jobs")

    teams = set(Quota.objects.values_list("team__name", flat=True))
    classes = set(PriorityClass.objects.values_list("name", flat=True))
    assert len(teams) > 1 and len(classes) > 1
    assert pending == {
        (("priority_class", c), ("reason", ""), ("status", status), ("team", t)): 0.0
        for t in teams for c in classes for status in ("active", "inadmissible")
    }


def test_operator_waiting_jobs_count_beside_the_0_series_of_the_queue(
    client_for: Callable[[str], Client], submit_as: Any,
) -> None:
    """The always-present series stay (at 0, no reason) when jobs wait: a sum by team, class
    or status reads the jobs, and no series of the graph comes and goes with the queue."""
    job = submit_as("alice", name="waits", gpus=2, gpu_types=("H100-80GB",))  # no cycle yet: it waits, active
    admin = client_for("admin")

    pending = series(admin, "quartermaster_pending_jobs")

    waiting = {labels: n for labels, n in pending.items() if dict(labels)["reason"]}
    assert waiting == {(("priority_class", job.priority_class.name), ("reason", job.pending_code),
                        ("status", "active"), ("team", job.team.name)): 1.0}
    baseline = (("priority_class", job.priority_class.name), ("reason", ""), ("status", "active"),
                ("team", job.team.name))
    assert pending[baseline] == 0.0
    assert sum(n for labels, n in pending.items() if dict(labels)["team"] == job.team.name) == 1.0
