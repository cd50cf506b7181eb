"""The simulator on a fleet it is given: the exact nodes, the GPU types, the real quota table
(cohorts, borrowing limits) and the real priority classes, instead of the ones it derives."""

from __future__ import annotations

import pytest

from scheduler_core.sim import simulate
from scheduler_core.sim.fleet import (
    FleetShape,
    build_gpu_types,
    build_nodes,
    build_priority_classes,
    build_quotas,
)
from scheduler_core.sim.trace import TraceJob
from scheduler_core.types import GpuTypeInfo, NodeInfo, PriorityClassInfo, QuotaInfo

H100 = GpuTypeInfo(name="h100", memory_gb=80)
A100 = GpuTypeInfo(name="a100", memory_gb=40)


def node(name: str, gpu_type: str = "h100", gpus: int = 8, leaf: str = "leaf0") -> NodeInfo:
    return NodeInfo(name=name, pool=gpu_type, gpu_type=gpu_type, gpus=gpus, cpus=128, memory_gb=1024,
                    leaf=leaf, spine="spine0")


TWO_NODES = (node("n1"), node("n2"))
JOBS = [
    TraceJob("a1", 0, 8, 600, 3600, "ann", team="vision"),
    TraceJob("a2", 0, 8, 600, 3600, "ann", team="vision"),
    TraceJob("b1", 3000, 1, 60, 3600, "bo", team="language"),
]


def quota(team: str, nominal: int, borrowing_limit: int | None = None, gpu_type: str = "h100") -> QuotaInfo:
    return QuotaInfo(team=team, gpu_type=gpu_type, nominal_gpus=nominal, borrowing_limit=borrowing_limit,
                     cohort="research")


def run(**parts: object) -> dict[str, float | int | None]:
    return simulate(JOBS, FleetShape(nodes=2), horizon_s=7200.0, **parts).as_dict()  # type: ignore[arg-type]


def test_the_derived_fleet_given_explicitly_replays_to_the_same_numbers() -> None:
    shape = FleetShape(nodes=2)
    nodes = build_nodes(shape)
    given = simulate(JOBS, shape, horizon_s=7200.0, nodes=nodes, gpu_types=build_gpu_types(shape),
                     quotas=build_quotas(JOBS, nodes), priority_classes=build_priority_classes(JOBS))
    assert given.as_dict() == simulate(JOBS, shape, horizon_s=7200.0).as_dict()


def test_a_borrowing_limit_of_the_real_quota_table_makes_a_team_wait() -> None:
    # Derived quotas: equal shares with unlimited borrowing, so both of vision's gangs start at once.
    assert run(nodes=TWO_NODES)["wait_large_mean_min"] == 0.0
    # The real table: vision is guaranteed 8 GPUs and may borrow none, so its second gang waits
    # for its first to end (10 minutes), although the other node is free.
    strict = run(nodes=TWO_NODES, gpu_types=(H100,), quotas=(quota("vision", 8, 0), quota("language", 8)))
    assert strict["wait_large_mean_min"] == pytest.approx(5.0)  # one waited 10 min, one none
    assert strict["wait_max_min"] == pytest.approx(10.0)


def test_each_team_gets_its_own_waits_and_gpu_hours_outside_the_report() -> None:
    result = simulate(JOBS, FleetShape(nodes=2), horizon_s=7200.0, nodes=TWO_NODES, gpu_types=(H100,),
                      quotas=(quota("vision", 8, 0), quota("language", 8)))
    assert result.teams["vision"] == {"jobs_total": 2, "jobs_done": 2, "wait_mean_min": 5.0, "wait_p95_min": 10.0,
                                      "allocated_gpu_hours": pytest.approx(2 * 8 * 600 / 3600)}
    assert result.teams["language"]["wait_mean_min"] == 0.0
    assert result.teams["language"]["allocated_gpu_hours"] == pytest.approx(60 / 3600)
    assert "teams" not in result.as_dict() and not any(k.startswith("vision") for k in result.as_dict())


def test_another_quota_table_changes_the_replay() -> None:
    changed = run(nodes=TWO_NODES, gpu_types=(H100,), quotas=(quota("vision", 16, 0), quota("language", 0)))
    assert changed["wait_max_min"] == 0.0 and changed["jobs_done"] == 3


def test_no_quotas_at_all_governs_nothing() -> None:
    assert run(nodes=TWO_NODES, gpu_types=(H100,), quotas=())["wait_max_min"] == 0.0


def test_the_exact_node_list_sets_capacity_and_where_typed_jobs_run() -> None:
    nodes = (node("big", gpus=8), node("small", "a100", gpus=4, leaf="leaf1"))
    jobs = [TraceJob("x", 0, 4, 3600, None, "ann", gpu_type="a100"), TraceJob("y", 0, 4, 3600, None, "ann", gpu_type="a100")]
    result = simulate(jobs, FleetShape(nodes=2), horizon_s=7300.0, nodes=nodes, gpu_types=(H100, A100)).as_dict()
    # 12 GPUs in all; the a100 jobs take the whole 4-GPU node one after the other.
    assert result["allocated"] == pytest.approx(4 * 7200 / (12 * 7300))
    assert result["wait_max_min"] == pytest.approx(60.0) and result["jobs_done"] == 2
    # waits split at the largest node (8 GPUs): both are small jobs
    assert result["wait_small_mean_min"] == pytest.approx(30.0) and result["wait_large_mean_min"] is None


def test_real_priority_classes_name_the_jobs_and_an_unknown_priority_is_refused() -> None:
    classes = (PriorityClassInfo(name="batch", value=0, grace_period_s=0), PriorityClassInfo(name="prod", value=900))
    jobs = [TraceJob("p", 0, 8, 60, None, "ann", priority=900), TraceJob("q", 0, 8, 60, None, "bo")]
    assert simulate(jobs, FleetShape(nodes=2), horizon_s=600.0, priority_classes=classes).as_dict()["jobs_done"] == 2
    with pytest.raises(ValueError, match="job 'r': no priority class has value 5"):
        simulate([TraceJob("r", 0, 1, 60, None, "ann", priority=5)], FleetShape(nodes=1), horizon_s=600.0,
                 priority_classes=classes)


@pytest.mark.parametrize(("parts", "message"), [
    ({"nodes": ()}, "nodes must not be empty"),
    ({"nodes": (node("n1"), node("n1"))}, "node 'n1' is listed twice"),
    ({"nodes": TWO_NODES, "gpu_types": (A100,)}, "GPU type 'h100', which is not among the GPU types"),
    ({"nodes": TWO_NODES, "quotas": (quota("vision", 8, gpu_type="tpu"),)}, "quota on 'tpu'"),
    ({"nodes": TWO_NODES, "quotas": (quota("vision", 8), quota("vision", 4))}, "two quotas on 'h100'"),
    ({"nodes": TWO_NODES, "quotas": (quota("vision", -1),)}, "nominal_gpus must be >= 0"),
])
def test_a_fleet_that_contradicts_itself_is_refused_by_name(parts: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        run(**parts)
