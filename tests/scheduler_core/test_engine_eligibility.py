"""Phase 1a: held jobs and jobs waiting for a dependency are not in line.

They take no place in the order, no quota, no reservation and no victim; they are still
explained every cycle, so their owners read why: a held job ranked after every queued job, a
job waiting for a dependency with no queue position."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core import DependencyCondition, ReasonCode, schedule
from tests.scheduler_core.engine_builders import bound, make_cluster, make_job, make_running, why


def test_held_job_is_not_queued_and_holds_nothing() -> None:
    plan = make_cluster().nodes(1).pending(make_job("h").gpus(4).held("alice")).plan()

    assert plan.binds == ()
    held = why(plan, "h")
    assert held.code is ReasonCode.HELD
    assert held.reason == "Held"
    assert held.message == "Held by alice: until it is released it is not in the queue and holds nothing."
    assert held.would_start_if == "it is released"
    assert held.eta is None
    assert held.resolvable


def test_held_job_with_a_reason_says_it_in_its_holders_words() -> None:
    plan = (make_cluster().nodes(1)
            .pending(make_job("h").gpus(4).held("admin root", "waiting for maintenance on rack 3")
                     .after("up", upstream_state="running"))
            .plan())

    held = why(plan, "h")
    assert held.code is ReasonCode.HELD
    assert held.message == ("Held by admin root: waiting for maintenance on rack 3 — until it is released it is not "
                            "in the queue and holds nothing. It also waits for job up to succeed (now running).")
    assert held.would_start_if == "it is released and job up succeeds"


def test_held_head_gets_no_reservation_and_small_jobs_run() -> None:
    # The held 16-GPU job would be the head (high priority, whole nodes): held, it reserves
    # nothing, so the small job binds and nothing is said to wait for a reservation.
    running = make_running(make_job("r").gpus(4).limit(3600)).on("n0", 0, 1, 2, 3)
    plan = (make_cluster().nodes(2).running(running)
            .pending(make_job("big").gpus(16).priority("high").held("admin bob"),
                     make_job("small").gpus(4).limit(7200).submitted(10))
            .plan())

    assert "small" in bound(plan)
    assert plan.reservations == ()
    assert plan.fleet.stranded_gpus == 0


def test_held_job_takes_no_quota() -> None:
    plan = (make_cluster().nodes(1).quota("ml", "a100", 4)
            .pending(make_job("held").gpus(4).held("alice"), make_job("next").gpus(4).submitted(5))
            .plan())

    assert "next" in bound(plan)


def test_held_job_is_never_a_preemptor() -> None:
    running = make_running(make_job("low").gpus(8).priority("low")).whole("n0")
    plan = (make_cluster().nodes(1).running(running)
            .pending(make_job("urgent").gpus(8).priority("high").held("alice")).plan())

    assert plan.preemptions == ()


def test_waiting_for_dependency_says_which_jobs_and_where_they_stand() -> None:
    job = (make_job("train").gpus(2).after("12", DependencyCondition.AFTER_OK, "running")
           .after("13", "afterany", "pending").after("14", "after"))
    plan = make_cluster().nodes(1).pending(job).plan()

    wait = why(plan, "train")
    assert plan.binds == ()
    assert wait.code is ReasonCode.WAITING_FOR_DEPENDENCY
    assert wait.message == ("Waits for job 12 to succeed (now running), job 13 to end (now pending) and "
                            "job 14 to start: until then it is not in the queue and holds nothing.")
    assert wait.would_start_if == "job 12 succeeds, job 13 ends and job 14 starts"
    assert wait.eta is None


def test_held_job_waiting_for_a_dependency_says_both() -> None:
    job = make_job("j").gpus(1).held("alice").after("7", DependencyCondition.AFTER_NOT_OK, "running")
    wait = why(make_cluster().nodes(1).pending(job).plan(), "j")

    assert wait.code is ReasonCode.HELD
    assert wait.message.endswith("It also waits for job 7 to fail (now running).")
    assert wait.would_start_if == "it is released and job 7 fails"


def test_held_jobs_rank_after_queued_and_never_runnable_jobs() -> None:
    running = make_running(make_job("r").gpus(8).limit(3600)).whole("n0")
    plan = (make_cluster().nodes(1).running(running)
            .pending(make_job("held-old").gpus(1).held("alice").submitted(0),
                     make_job("never").gpus(64).per_node(64).submitted(2),
                     make_job("queued").gpus(2).submitted(3),
                     make_job("held-new").gpus(1).held("bob").submitted(4))
            .plan())

    positions = {p.job_id: p.queue_position for p in plan.pending}
    assert positions == {"queued": 1, "never": 2, "held-old": 3, "held-new": 4}


def test_a_job_waiting_on_a_dependency_has_no_queue_position() -> None:
    """It cannot start until another job starts, succeeds, fails or ends: it is not at any
    place in the queue, and no job behind it counts it. Before, "dep" read position 3 and the
    held job submitted after it 4, as if one job were ahead of it in line."""
    running = make_running(make_job("r").gpus(8).limit(3600)).whole("n0")
    plan = (make_cluster().nodes(1).running(running)
            .pending(make_job("dep").gpus(1).after("r", "afterany", "running").submitted(0),
                     make_job("held-dep").gpus(1).held("alice").after("r", "afterok", "running").submitted(1),
                     make_job("queued").gpus(2).submitted(2),
                     make_job("never").gpus(64).per_node(64).submitted(3),
                     make_job("held").gpus(1).held("alice").submitted(4))
            .plan())

    positions = {p.job_id: p.queue_position for p in plan.pending}
    assert positions == {"queued": 1, "never": 2, "held": 3, "dep": None, "held-dep": None}
    # what it waits for is said instead, in the engine's words
    assert why(plan, "dep").message == ("Waits for job r to end (now running): until then it is not in the "
                                        "queue and holds nothing.")
    assert why(plan, "dep").would_start_if == "job r ends"


@settings(max_examples=60, deadline=None)
@given(gpus=st.lists(st.integers(min_value=1, max_value=16), min_size=1, max_size=8),
       held=st.lists(st.booleans(), min_size=8, max_size=8),
       nodes=st.integers(min_value=1, max_value=3))
def test_out_of_line_jobs_change_no_decision(gpus: list[int], held: list[bool], nodes: int) -> None:
    """Adding held or dependent jobs to a snapshot changes nobody else's bind, reservation or
    preemption, and leaves the others' reasons and ETAs as they were."""
    jobs = [make_job(f"j{k}").gpus(n).limit(3600).submitted(k).obj() for k, n in enumerate(gpus)]
    base = make_cluster().nodes(nodes).pending(*jobs).at(100).snapshot()
    kept_out = [replace(job, held_by="alice") if flag else job
                for job, flag in zip(jobs, held, strict=False)]
    queued = [job for job in kept_out if not job.held_by]
    alone = schedule(replace(base, pending=tuple(queued)))
    together = schedule(replace(base, pending=tuple(kept_out)))

    assert together.binds == alone.binds
    assert together.reservations == alone.reservations
    assert together.preemptions == alone.preemptions
    in_line = [p for p in together.pending if p.code is not ReasonCode.HELD]
    assert [(p.job_id, p.code, p.message, p.eta, p.queue_position) for p in in_line] == \
        [(p.job_id, p.code, p.message, p.eta, p.queue_position) for p in alone.pending]
    assert {p.job_id for p in together.pending if p.code is ReasonCode.HELD} == \
        {job.id for job in kept_out if job.held_by}
