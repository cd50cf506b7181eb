"""A job array's tasks waiting on its task limit each get their own earliest start: the k-th in
line starts no earlier than the k-th slot to free up, each task ahead taking a slot for its own
runtime limit. Every task of a 0-9%2 array of 10-minute tasks said "in 9m" (the first slot's
time), as if all eight could start then (found in the demo: `qm list` START column)."""

from __future__ import annotations

from engine_builders import bound, make_cluster, make_job, make_running, why

from scheduler_core import ReasonCode

HOUR = 3600.0


def task(i: int, limit: int = 2, runtime: float = HOUR):
    return make_job(f"sweep-{i}").gpus(1).limit(runtime).submitted(i).array("sweep", limit)


def test_each_waiting_task_starts_after_the_tasks_ahead_of_it_have_had_their_slot():
    plan = (make_cluster().nodes(1)
            .running(make_running(task(0)).on("n0", 0).started(0),
                     make_running(task(1).limit(2 * HOUR)).on("n0", 1).started(0))
            .pending(*(task(i) for i in range(2, 7)))
            .plan())
    assert bound(plan) == {}
    assert all(why(plan, f"sweep-{i}").code is ReasonCode.ARRAY_TASK_LIMIT for i in range(2, 7))
    # slots free at 1h (sweep-0) and 2h (sweep-1); each task then runs its hour in the next free slot
    assert [why(plan, f"sweep-{i}").eta for i in range(2, 7)] == [HOUR, 2 * HOUR, 2 * HOUR, 3 * HOUR, 3 * HOUR]


def test_a_task_ahead_without_a_runtime_limit_holds_its_slot_for_ever():
    plan = (make_cluster().nodes(1)
            .running(make_running(task(0, limit=1)).on("n0", 0).started(0))
            .pending(task(1, limit=1).limit(None), task(2, limit=1).priority("low"))
            .plan())
    assert [why(plan, j).queue_position for j in ("sweep-1", "sweep-2")] == [1, 2]
    assert why(plan, "sweep-1").eta == HOUR
    assert why(plan, "sweep-2").eta is None  # behind a task that may run for ever


def test_a_limit_lowered_below_the_running_tasks_needs_the_extra_ends_first():
    # 3 tasks run, the limit is now 1: room for one more once all three have ended
    plan = (make_cluster().nodes(1)
            .running(*(make_running(task(i, limit=1).limit((i + 1) * HOUR)).on("n0", i).started(0) for i in range(3)))
            .pending(task(3, limit=1), task(4, limit=1))
            .plan())
    assert why(plan, "sweep-3").eta == 3 * HOUR
    assert why(plan, "sweep-4").eta == 4 * HOUR


def test_two_arrays_do_not_share_their_lines():
    other = [make_job(f"other-{i}").gpus(1).limit(HOUR / 2).submitted(10 + i).array("other", 1) for i in range(3)]
    plan = (make_cluster().nodes(1)
            .running(make_running(task(0, limit=1)).on("n0", 0).started(0),
                     make_running(other[0]).on("n0", 1).started(0))
            .pending(task(1, limit=1), task(2, limit=1), other[1], other[2])
            .plan())
    assert [why(plan, j).eta for j in ("sweep-1", "sweep-2", "other-1", "other-2")] == [HOUR, 2 * HOUR, HOUR / 2, HOUR]


def a_full_fleet_and_a_fresh_array(tasks: int = 10, limit: int = 3):
    """``qm submit --array 0-9%3`` of 10-minute tasks on a full fleet: the node's job may be
    preempted once it has run its 180 s minimum runtime (stopped by t=210)."""
    return (make_cluster().nodes(1)
            .priority("low", 10, min_runtime_s=180)
            .running(make_running(make_job("busy").priority("low").gpus(8).limit(HOUR)).whole("n0").started(0))
            .pending(*(task(i, limit=limit, runtime=600) for i in range(tasks))))


def test_before_any_task_runs_only_the_limits_worth_of_tasks_share_the_first_start():
    # The first cycle of the demo walk: all ten tasks were told t=210 ("in 3m"), though at
    # most three of them can run then; the next three start when those have run (810), and so on.
    plan = a_full_fleet_and_a_fresh_array().plan()
    assert bound(plan) == {}
    assert all(why(plan, f"sweep-{i}").code is ReasonCode.MINIMUM_RUNTIME_PROTECTED for i in range(10))
    assert [why(plan, f"sweep-{i}").eta for i in range(10)] == [210] * 3 + [810] * 3 + [1410] * 3 + [2010]
    first, fourth = why(plan, "sweep-0"), why(plan, "sweep-3")
    assert "array" not in first.message
    assert fourth.message.startswith(first.message)
    assert fourth.message.endswith(
        " Estimated start t=810: its array runs at most 3 tasks at a time, and the 3 tasks of it "
        "ahead of this one run first (by runtime limits).")
    assert why(plan, "sweep-9").message.endswith(
        " Estimated start t=2010: its array runs at most 3 tasks at a time, and the 9 tasks of it "
        "ahead of this one run first (by runtime limits).")
    assert "a task of its array ahead of it ends" in fourth.would_start_if


def test_the_next_cycle_tells_the_tasks_left_the_same_starts():
    # a cycle later, the three first tasks run (from t=210): the rest wait on the limit, as told
    plan = (make_cluster().nodes(1).at(210)
            .running(*(make_running(task(i, limit=3, runtime=600)).on("n0", i).started(210) for i in range(3)))
            .pending(*(task(i, limit=3, runtime=600) for i in range(3, 10)))
            .plan())
    assert [why(plan, f"sweep-{i}").eta for i in range(3, 10)] == [810] * 3 + [1410] * 3 + [2010]
    assert all(why(plan, f"sweep-{i}").code is ReasonCode.ARRAY_TASK_LIMIT for i in range(3, 10))


def test_a_task_whose_own_start_is_later_than_its_arrays_slot_keeps_its_own_words():
    # limit 3 of 2 tasks: the array never holds a task back, the sentences say nothing of it
    plan = a_full_fleet_and_a_fresh_array(tasks=2).plan()
    assert [why(plan, f"sweep-{i}").eta for i in range(2)] == [210, 210]
    assert all("array" not in why(plan, f"sweep-{i}").message for i in range(2))


def test_before_any_task_runs_a_task_behind_one_without_a_runtime_limit_has_no_start():
    # limit 1 of tasks without runtime limits: the first may run for ever, so the second
    # one's start is not known
    cluster = (make_cluster().nodes(1)
               .priority("low", 10, min_runtime_s=180)
               .running(make_running(make_job("busy").priority("low").gpus(8).limit(HOUR)).whole("n0").started(0))
               .pending(task(0, limit=1).limit(None), task(1, limit=1).limit(None)))
    plan = cluster.plan()
    assert why(plan, "sweep-0").eta == 210
    second = why(plan, "sweep-1")
    assert second.eta is None
    assert second.message.endswith(
        "No start can be estimated: its array runs at most 1 task at a time, and 1 task of it "
        "ahead of this one has no end known by runtime limits.")


def test_a_task_that_preempts_its_way_in_frees_its_slot_by_its_runtime_limit():
    # sweep-0 preempts low0 and starts once it has stopped (t=30); sweep-1 waits on the limit
    # of 1 until sweep-0 has run its hour. It was told no start: a nominated task's slot
    # counted as never freeing.
    plan = (make_cluster().nodes(2).priority("low", 10, grace_period_s=30)
            .running(make_running(make_job("low0").priority("low").gpus(8)).whole("n0"),
                     make_running(make_job("low1").priority("low").gpus(8)).whole("n1"))
            .pending(*(task(i, limit=1).gpus(8).priority("high") for i in range(2)))
            .plan())
    first, second = why(plan, "sweep-0"), why(plan, "sweep-1")
    assert first.code is ReasonCode.WAITING_FOR_PREEMPTION and first.eta == 30
    assert second.code is ReasonCode.ARRAY_TASK_LIMIT
    assert second.eta == 30 + HOUR


def test_the_first_cycles_starts_hold_as_the_fleet_evolves_by_runtime_limits():
    # every task ends at its runtime limit and the engine is asked again at every end: each
    # task starts by the start it was told in the first cycle (sweep-3 to sweep-9 started
    # at t=810 and later, 10 to 30 min after the t=210 they had been told)
    from test_engine_explain_eta import evolve

    snap = a_full_fleet_and_a_fresh_array().snapshot()
    first, starts = evolve(snap, also_at=(180,))  # (a cycle when busy's minimum runtime lifts)
    told = {p.job_id: p.eta for p in first.pending}
    assert sorted(starts) == sorted(told)
    assert all(starts[j] <= told[j] for j in told), (starts, told)
    assert [starts[f"sweep-{i}"] for i in range(10)] == [210] * 3 + [810] * 3 + [1410] * 3 + [2010]


def test_a_task_over_its_quota_on_two_gpu_types_waits_for_its_arrays_slot_too():
    # ml's quota has room for both tasks at t=1000 (a100) on either type, but the array runs
    # one at a time: sweep-1 starts when sweep-0 has run its hour, at t=4600
    plan = (make_cluster().nodes(1).nodes(1, gpu_type="h100", prefix="h")
            .quota("ml", "a100", 2).quota("ml", "h100", 2)
            .running(make_running(make_job("ra").gpus(2).types("a100").limit(1000)).on("n0", 0, 1).started(0),
                     make_running(make_job("rh").gpus(2).types("h100").limit(2000)).on("h0", 0, 1).started(0))
            .pending(*(task(i, limit=1).types("a100", "h100") for i in range(2)))
            .plan())
    assert why(plan, "sweep-0").eta == 1000
    second = why(plan, "sweep-1")
    assert second.code is ReasonCode.QUOTA_EXCEEDED and "both GPU types" in second.message
    assert second.eta == 1000 + HOUR
    assert second.message.endswith(
        "Estimated start t=4600: its array runs at most 1 task at a time, and the 1 task of it ahead "
        "of this one runs first (by runtime limits).")
