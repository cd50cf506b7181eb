"""The demo's scavenger class (best-effort) runs a minimum runtime before it may be preempted.

With none, the engine's cheapest victim was always the best-effort job bound last (the least
work since a checkpoint), and in the demo every arriving research job took it: the same job
bound and preempted again and again, up to 5 times a minute (5 Dec). The engine did as told:
the preemptors arrived after the victim's bind (no capacity promised to them was re-bound),
the grace period was waited, and the class's budget (10 a day) allowed it. The class now runs
30 s, one checkpoint interval of the demo's jobs, before it may be preempted. Checked on a
tiny cluster with the demo's own class settings (controlplane/demo_fleet.py)."""

from __future__ import annotations

from controlplane.demo_fleet import PRIORITY_CLASSES
from scheduler_core import ReasonCode
from tests.scheduler_core.engine_builders import make_cluster, make_job, make_running, preempted, why

NOW = 10_000.0


def _demo_classes():
    cluster = make_cluster().nodes(1, gpus=1).at(NOW)
    for name, value, preemptible, may_preempt, grace, min_runtime, budget, _, _ in PRIORITY_CLASSES:
        cluster.priority(name, value, preemptible=preemptible, may_preempt_lower=may_preempt,
                         grace_period_s=grace, min_runtime_s=min_runtime, preemption_budget=budget)
    return cluster


def _plan(ran_s: float):
    """A best-effort job bound ``ran_s`` ago on the fleet's one GPU, and a research job arriving now."""
    return (_demo_classes()
            .running(make_running(make_job("sweep").priority("best-effort").gpus(1).checkpoint_every(30))
                     .on("n0", 0).started(NOW - ran_s))
            .pending(make_job("notebook").priority("research").gpus(1).submitted(NOW))
            .plan())


def test_a_scavenger_job_just_bound_is_not_preempted_by_the_next_arrival() -> None:
    plan = _plan(ran_s=4)
    assert preempted(plan) == []
    notebook = why(plan, "notebook")
    assert notebook.code is ReasonCode.MINIMUM_RUNTIME_PROTECTED
    assert "job sweep has run 4 s of its 30 s minimum runtime" in notebook.message


def test_a_scavenger_job_past_its_minimum_runtime_is_preempted_as_before() -> None:
    assert preempted(_plan(ran_s=31)) == ["sweep"]
