"""The simulated fleet: topology, GPU types dealt in blocks, quotas and classes from the trace."""

from __future__ import annotations

import pytest

from scheduler_core.sim.fleet import FleetShape, build_nodes, build_priority_classes, build_quotas, job_spec
from scheduler_core.sim.trace import TraceJob


def test_nodes_hang_off_leaves_and_spines() -> None:
    nodes = build_nodes(FleetShape(nodes=10, nodes_per_leaf=4, leaves_per_spine=2, gpu_types=("a100", "h100")))
    assert [n.leaf for n in nodes] == ["leaf000"] * 4 + ["leaf001"] * 4 + ["leaf002"] * 2
    assert [n.spine for n in nodes] == ["spine00"] * 8 + ["spine01"] * 2
    assert [n.gpu_type for n in nodes] == ["a100"] * 5 + ["h100"] * 5


def test_single_team_trace_runs_without_quotas_like_the_seed() -> None:
    jobs = [TraceJob("a", 0, 8, 60, None, "ann"), TraceJob("b", 0, 8, 60, None, "bo")]
    assert build_quotas(jobs, build_nodes(FleetShape(nodes=2))) == ()


def test_teams_split_nominal_quota_in_one_cohort() -> None:
    jobs = [TraceJob(str(i), 0, 1, 60, None, "u", team=team) for i, team in enumerate(("x", "y", "z"))]
    quotas = build_quotas(jobs, build_nodes(FleetShape(nodes=2, gpus_per_node=8)))
    assert [(q.team, q.nominal_gpus, q.cohort, q.borrowing_limit) for q in quotas] == [
        ("x", 6, "fleet", None), ("y", 5, "fleet", None), ("z", 5, "fleet", None)]


def test_priorities_become_classes_and_the_engine_never_sees_the_true_duration() -> None:
    job = TraceJob("a", 5, 16, 1234, 7200, "ann", priority=7, checkpoint_interval_s=600, gpu_type="h100")
    assert [(c.name, c.value) for c in build_priority_classes([job])] == [("p0", 0), ("p7", 7)]
    spec = job_spec(job)
    assert (spec.priority_class, spec.runtime_limit_s, spec.gpu_types, spec.team) == ("p7", 7200, ("h100",), "default")
    assert 1234 not in [getattr(spec, name) for name in spec.__slots__]


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="nodes must be >= 1"):
        FleetShape(nodes=0)
    with pytest.raises(ValueError, match="at least as many nodes"):
        FleetShape(nodes=1, gpu_types=("a", "b"))
