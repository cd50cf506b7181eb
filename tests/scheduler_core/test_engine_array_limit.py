"""A job array's task limit (Slurm's ``--array=0-99%10``): at most that many tasks of the
array hold GPUs at once; its other tasks keep their place in the queue, untried, and say
``JobArrayTaskLimit`` with when a running task ends."""

from __future__ import annotations

from engine_builders import bound, make_cluster, make_job, make_running, preempted, why
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core import ReasonCode, schedule

HOUR = 3600.0


def task(i: int, array: str = "sweep", limit: int | None = 2, gpus: int = 1):
    return make_job(f"{array}-{i}").gpus(gpus).limit(HOUR).submitted(i).array(array, limit)


def test_array_task_limit_runs_at_most_that_many_tasks_at_once():
    plan = make_cluster().nodes(1).pending(*(task(i) for i in range(6))).plan()
    assert sorted(bound(plan)) == ["sweep-0", "sweep-1"]
    for i in range(2, 6):
        w = why(plan, f"sweep-{i}")
        assert w.code is ReasonCode.ARRAY_TASK_LIMIT
        assert w.reason == "JobArrayTaskLimit"
        assert w.resolvable
        assert "at most 2 tasks at a time and 2 tasks of it hold GPUs now" in w.message
    # they keep their places in the queue
    assert [why(plan, f"sweep-{i}").queue_position for i in range(2, 6)] == [1, 2, 3, 4]


def test_array_task_limit_counts_running_and_stopping_tasks():
    plan = (make_cluster().nodes(1).at(60)
            .running(make_running(task(0, limit=3)).on("n0", 0).started(0),
                     make_running(task(1, limit=3)).on("n0", 1).started(0).terminating())
            .pending(*(task(i, limit=3) for i in range(2, 6)))
            .plan())
    assert sorted(bound(plan)) == ["sweep-2"]


def test_array_task_limit_eta_is_when_a_running_task_ends():
    plan = (make_cluster().nodes(1)
            .running(make_running(task(0).limit(2 * HOUR)).on("n0", 0),
                     make_running(task(1).limit(HOUR)).on("n0", 1))
            .pending(task(2), task(3))
            .plan())
    assert bound(plan) == {}
    assert why(plan, "sweep-2").eta == HOUR


def test_array_task_limit_leaves_other_arrays_and_jobs_alone():
    plan = (make_cluster().nodes(1)
            .pending(*(task(i, limit=1) for i in range(3)),
                     *(task(i, array="other", limit=None) for i in range(3)),
                     make_job("solo").gpus(1).submitted(0))
            .plan())
    assert sorted(bound(plan)) == ["other-0", "other-1", "other-2", "solo", "sweep-0"]


def test_array_task_limit_a_throttled_task_takes_no_reservation():
    # n0 is full; the array's next 8-GPU task is throttled, so the job behind it is the head
    plan = (make_cluster().nodes(1)
            .running(make_running(task(0, limit=1, gpus=8)).whole("n0"))
            .pending(task(1, limit=1, gpus=8), make_job("next").gpus(8).submitted(5))
            .plan())
    assert [r.job_id for r in plan.reservations] == ["next"]
    assert why(plan, "sweep-1").code is ReasonCode.ARRAY_TASK_LIMIT


def test_array_task_limit_a_throttled_task_preempts_nothing_and_a_preemption_counts():
    cluster = (make_cluster().nodes(2)
               .running(make_running(make_job("low0").priority("low").gpus(8)).whole("n0"),
                        make_running(make_job("low1").priority("low").gpus(8)).whole("n1"))
               .pending(*(task(i, limit=1, gpus=8).priority("high") for i in range(2))))
    plan = cluster.plan()
    assert len(preempted(plan)) == 1  # the second task waits for the first
    assert why(plan, "sweep-0").code is ReasonCode.WAITING_FOR_PREEMPTION
    assert why(plan, "sweep-1").code is ReasonCode.ARRAY_TASK_LIMIT


def test_array_task_limit_below_one_is_an_invalid_request():
    plan = make_cluster().nodes(1).pending(task(0, limit=0)).plan()
    w = why(plan, "sweep-0")
    assert w.code is ReasonCode.INVALID_REQUEST
    assert "array_task_limit must be at least 1" in w.message


@settings(max_examples=60, deadline=None)
@given(
    limit=st.integers(1, 4),
    running=st.integers(0, 4),
    pending=st.integers(1, 12),
    gpus=st.sampled_from([1, 2, 4, 8]),
    nodes=st.integers(1, 4),
)
def test_array_task_limit_invariant_never_more_tasks_than_the_limit(limit, running, pending, gpus,
                                                                    nodes):
    running = min(running, limit, nodes)
    cluster = make_cluster().nodes(nodes).at(60)
    for i in range(running):
        cluster.running(make_running(task(i, limit=limit, gpus=8)).whole(f"n{i}").started(0))
    cluster.pending(*(task(running + i, limit=limit, gpus=gpus) for i in range(pending)))
    plan = schedule(cluster.snapshot())
    started = len(plan.binds) + sum(1 for w in plan.pending
                                    if w.code is ReasonCode.WAITING_FOR_PREEMPTION)
    assert running + started <= limit
    if running + started < limit:
        assert not any(w.code is ReasonCode.ARRAY_TASK_LIMIT for w in plan.pending)


def test_array_task_limit_tasks_start_in_index_order_job_9_before_job_10():
    # the control plane's ids are numbers: a tie on submission time goes to the lower number
    tasks = [make_job(str(i)).gpus(1).limit(HOUR).submitted(0).array("a", 2) for i in range(9, 15)]
    plan = make_cluster().nodes(1).pending(*reversed(tasks)).plan()
    assert sorted(bound(plan), key=int) == ["9", "10"]
    assert [why(plan, str(i)).queue_position for i in range(11, 15)] == [1, 2, 3, 4]


def test_an_invalid_task_of_a_full_array_is_explained_invalid_and_takes_no_slot():
    # sweep-0 runs (limit 1) until t=3600. sweep-1's runtime limit of -5 s is invalid: it was
    # told JobArrayTaskLimit (resolvable) and, taking the first slot for -5 s, gave sweep-2
    # an estimated start of t=3595, before the slot frees at t=3600.
    plan = (make_cluster().nodes(1).at(10)
            .running(make_running(task(0, limit=1)).on("n0", 0).started(0))
            .pending(task(1, limit=1).limit(-5), task(2, limit=1))
            .plan())
    invalid = why(plan, "sweep-1")
    assert (invalid.code, invalid.resolvable) == (ReasonCode.INVALID_REQUEST, False)
    assert why(plan, "sweep-2").code is ReasonCode.ARRAY_TASK_LIMIT
    assert why(plan, "sweep-2").eta == HOUR
