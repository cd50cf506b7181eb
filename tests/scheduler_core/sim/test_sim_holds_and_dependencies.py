"""The simulator replays holds and dependencies as the control plane applies them: a held job
waiting then stays out of the queue until its hold ends, and a job with dependencies starts only
once they are met in the replay's own timeline (``TraceJob.holds``, ``depends_on``).

Until 7 Dec a trace job had neither, so the what-if replay started a job that waited on
another's end (``afterok``) beside it, and a job held for hours at once: ETAs and waits that
could not happen."""

from __future__ import annotations

import pytest

from scheduler_core.sim import FleetShape, TraceDependency, TraceHold, TraceJob, simulate
from scheduler_core.types import DependencyCondition

SHAPE = FleetShape(nodes=2, gpus_per_node=8, nodes_per_leaf=2, leaves_per_spine=1)
HORIZON_S = 4 * 3600.0
AFTER, OK, NOT_OK, ANY = (DependencyCondition.AFTER, DependencyCondition.AFTER_OK, DependencyCondition.AFTER_NOT_OK,
                          DependencyCondition.AFTER_ANY)


def job(job_id: str, gpus: int = 8, duration_s: float = 600, submit_s: float = 0, **fields: object) -> TraceJob:
    return TraceJob(job_id, submit_s, gpus, duration_s, 3600, "ann", **fields)  # type: ignore[arg-type]


def on(upstream: str, condition: DependencyCondition = OK, met_s: float | None = None) -> tuple[TraceDependency]:
    return (TraceDependency(upstream, condition, met_s),)


def figures(jobs: list[TraceJob]) -> dict[str, float | int | None]:
    return simulate(jobs, SHAPE, horizon_s=HORIZON_S).as_dict()


def test_a_dependent_job_starts_only_when_its_upstream_job_ends_in_the_replay() -> None:
    # room for both at once: without the dependency the second starts at 0, beside the first
    free = figures([job("prep"), job("train")])
    assert free["wait_max_min"] == 0.0

    chained = figures([job("prep"), job("train", depends_on=on("prep", OK))])

    assert chained["wait_max_min"] == pytest.approx(10.0)  # prep's 600 s
    assert (chained["jobs_done"], chained["jobs_dependency_never_met"]) == (2, 0)


def test_a_chain_waits_link_by_link() -> None:
    result = figures([job("a"), job("b", depends_on=on("a", ANY)), job("c", depends_on=on("b", OK))])

    assert result["wait_max_min"] == pytest.approx(20.0)  # c starts when b ends, at 1200 s
    assert result["jobs_done"] == 3


def test_an_after_dependency_starts_its_job_at_the_instant_its_upstream_starts() -> None:
    # the fleet is full until 600 s; "first" starts then, and "second" (after: first starts)
    # with it, not at the next event (first's end, 1200 s)
    result = figures([job("full", gpus=16), job("first", submit_s=1), job("second", submit_s=1,
                                                                          depends_on=on("first", AFTER))])

    assert result["wait_max_min"] == pytest.approx(599 / 60)
    assert result["jobs_done"] == 3


def test_afterok_on_a_job_that_does_not_succeed_is_never_met_and_cancels_its_job_down_the_chain() -> None:
    result = figures([
        job("fails", succeeds=False),
        job("on-success", depends_on=on("fails", OK)),
        job("after-that", depends_on=on("on-success", OK)),
        job("cleanup", depends_on=on("fails", NOT_OK)),
    ])

    assert result["jobs_dependency_never_met"] == 2  # on-success, then after-that
    # left out of the waits and of the jobs submitted, as jobs that never ran
    assert (result["jobs_total"], result["jobs_done"]) == (2, 2)
    assert result["wait_max_min"] == pytest.approx(10.0)  # cleanup, once "fails" ended


def test_a_run_killed_at_its_runtime_limit_did_not_succeed() -> None:
    overrun = TraceJob("overrun", 0, 8, 7200, 1800, "ann")  # runs past its 30 min limit: killed
    result = figures([overrun, job("on-success", depends_on=on("overrun", OK)),
                      job("on-failure", depends_on=on("overrun", NOT_OK))])

    assert result["jobs_killed"] == 1 and result["jobs_dependency_never_met"] == 1
    assert result["wait_max_min"] == pytest.approx(30.0)


def test_any_one_of_its_dependencies_met_is_enough() -> None:
    deps = (TraceDependency("fails", OK), TraceDependency("succeeds", OK))
    result = figures([job("fails", duration_s=300, succeeds=False), job("succeeds", duration_s=900, gpus=4),
                      job("either", gpus=4, depends_on=deps, depends_on_any=True)])

    assert result["wait_max_min"] == pytest.approx(15.0)  # waits past fails' end, for succeeds'
    assert result["jobs_dependency_never_met"] == 0

    every = figures([job("fails", duration_s=300, succeeds=False), job("succeeds", duration_s=900, gpus=4),
                     job("both", gpus=4, depends_on=deps)])
    assert every["jobs_dependency_never_met"] == 1


def test_a_dependency_on_a_job_outside_the_trace_is_met_when_it_was() -> None:
    met = figures([job("late", depends_on=on("before-the-window", OK, met_s=1200))])
    assert met["wait_max_min"] == pytest.approx(20.0)

    unmet = figures([job("stuck", depends_on=on("before-the-window", OK, met_s=None))])
    assert (unmet["jobs_done"], unmet["jobs_waiting_for_dependency_at_horizon"]) == (0, 1)


def test_a_held_job_starts_when_its_hold_ends_and_never_while_held() -> None:
    released = figures([job("held", holds=(TraceHold(0, 1800, "alice"),))])
    assert released["wait_max_min"] == pytest.approx(30.0)
    assert released["jobs_held_at_horizon"] == 0

    still = figures([job("held", holds=(TraceHold(0, None, "an admin"),))])
    assert (still["jobs_done"], still["jobs_pending_at_horizon"], still["jobs_held_at_horizon"]) == (0, 1, 1)


def test_a_hold_placed_once_the_job_runs_does_not_stop_it() -> None:
    result = figures([job("runs", holds=(TraceHold(60, 1800, "alice"),))])

    assert (result["wait_max_min"], result["jobs_done"]) == (0.0, 1)


def test_a_requeue_held_stops_the_job_running_then_and_it_runs_again_from_its_release() -> None:
    # `qm requeue --hold` stops a running job (the control plane's requeue, after its class's
    # grace period: 30 s, the simulator's default class) and puts it back in the queue held;
    # released at 1200 s it runs its 1800 s again (no checkpoint: from scratch). Until 7 Dec the
    # replay let it run on as if merely held.
    held = TraceHold(600, 1200, "alice", requeues=True)
    result = figures([job("runs", duration_s=1800, holds=(held,))])

    assert (result["jobs_requeued_held"], result["jobs_done"]) == (1, 1)
    assert result["wait_max_min"] == pytest.approx(9.5)  # back in the queue at 630 s, held to 1200 s
    assert result["preemptions"] == 0  # a requeue someone asked for, not the engine's preemption
    # stopped at 630 s, run again from 1200 s for its whole 1800 s: busy 2430 s of the 16 GPUs' 4 h
    assert result["allocated"] == pytest.approx(8 * 2430 / (16 * HORIZON_S))


def test_a_requeue_held_of_a_job_waiting_then_only_holds_it() -> None:
    full = job("full", gpus=16, duration_s=1800)
    waiting = job("waits", holds=(TraceHold(600, 2400, "alice", requeues=True),))
    result = figures([full, waiting])

    assert result["jobs_requeued_held"] == 0
    assert result["wait_max_min"] == pytest.approx(40.0)  # held until 2400 s, though room came at 1800 s


def test_a_requeue_held_stops_a_checkpointing_job_keeping_its_work_to_the_last_checkpoint() -> None:
    # checkpoints every 500 s: stopped at 1200 s it keeps 1000 s of its 1800, and runs 800 s more
    # from its release at 1500 s: done at 2300 s, where from scratch it would end at 3300 s
    held = TraceHold(1200, 1500, "alice", requeues=True)
    one = simulate([job("runs", duration_s=1800, checkpoint_interval_s=500, holds=(held,))], SHAPE,
                   horizon_s=2400.0).as_dict()
    assert (one["jobs_done"], one["jobs_running_at_horizon"]) == (1, 0)
    none = simulate([job("runs", duration_s=1800, holds=(held,))], SHAPE, horizon_s=2400.0).as_dict()
    assert (none["jobs_done"], none["jobs_running_at_horizon"]) == (0, 1)


def test_a_held_whole_node_job_strands_no_gpus() -> None:
    # a 4-GPU job on a node, and a 16-GPU job (whole nodes) held throughout: the free GPUs of the
    # half-used node are not stranded, since no job in line waits for whole nodes
    result = figures([job("small", gpus=4, duration_s=3600), job("wide", gpus=16,
                                                                   holds=(TraceHold(0, None, "alice"),))])

    assert result["stranded_gpus"] == 0.0


def test_a_trace_without_holds_or_dependencies_reports_as_before() -> None:
    result = figures([job("a"), job("b")])

    assert not {"jobs_held_at_horizon", "jobs_dependency_never_met",
                "jobs_waiting_for_dependency_at_horizon"} & set(result)


def test_singletons_of_one_user_and_name_run_one_at_a_time_in_trace_order() -> None:
    # room for all three at once; the two singletons named "sweep" run one after the other, the
    # job of another name beside them
    result = figures([job("s1", gpus=4, name="sweep", singleton=True), job("s2", gpus=4, name="sweep", singleton=True),
                      job("other", gpus=4, name="eval", singleton=True)])

    assert result["wait_max_min"] == pytest.approx(10.0)  # s2 waits for s1's 600 s
    assert result["jobs_done"] == 3


def test_a_singleton_waits_for_a_running_job_of_its_name_that_is_no_singleton() -> None:
    result = figures([job("plain", gpus=4, name="sweep"), job("single", gpus=4, submit_s=60, name="sweep",
                                                            singleton=True)])

    assert result["wait_max_min"] == pytest.approx(9.0)  # from 60 s to plain's end at 600 s


def test_a_singleton_bound_beside_a_job_of_its_name_waits_for_it() -> None:
    # plain was submitted after the singleton, so it does not wait ahead of it, and both fit at
    # 0 s: the control plane drops the singleton's bind, which then waits for plain to end
    result = figures([job("single", gpus=4, name="sweep", singleton=True),
                      job("plain", gpus=4, submit_s=0, name="sweep")])

    assert result["wait_max_min"] == pytest.approx(10.0)
    assert result["jobs_done"] == 2


def test_jobs_of_other_users_do_not_hold_a_singleton_up() -> None:
    other = TraceJob("theirs", 0, 4, 600, 3600, "bob", name="sweep")
    result = figures([other, job("mine", gpus=4, name="sweep", singleton=True)])

    assert result["wait_max_min"] == 0.0
