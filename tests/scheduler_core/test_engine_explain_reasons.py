"""Every waiting reason on a small hand-built fleet, with the numbers of its sentence checked
against the snapshot, and the cases where two reasons hold at once."""

from __future__ import annotations

from engine_builders import make_cluster, make_job, make_running, why

from scheduler_core import NodeState, ReasonCode, SchedulerConfig

NO_BACKFILL = SchedulerConfig(backfill=False)


def two_leaves_half_busy():
    """Leaf A: n0 (r0 holds 4 GPUs until t=3600), n1 free; leaf B: n2 (r2 holds 4 until
    t=7200), n3 free. 24 GPUs free, at most 12 under one leaf."""
    return (
        make_cluster().nodes(2, leaf="A").nodes(2, leaf="B", start=2).at(0)
        .running(make_running(make_job("r0").gpus(4).limit(3600)).on("n0", 0, 1, 2, 3),
                 make_running(make_job("r2").gpus(4).limit(7200)).on("n2", 0, 1, 2, 3))
    )


def test_a_same_leaf_gang_says_how_much_one_leaf_has_and_when_one_has_enough():
    # Before: "24 a100 GPUs free, but no single leaf switch has room for all 16." and no ETA
    # at all (the fleet has the GPUs now, so the fleet-wide estimate said nothing).
    plan = two_leaves_half_busy().pending(
        make_job("t").gpus(16).per_node(4).topology("same_leaf").limit(3600)).plan(NO_BACKFILL)
    t = why(plan, "t")
    assert t.code is ReasonCode.TOPOLOGY_UNSATISFIED
    assert t.message.startswith(
        "24 a100 GPUs free, but no single leaf switch has room for all 16 (at most 12 free under "
        "one).")
    assert t.eta == 3600.0  # leaf A is whole when r0 ends
    assert t.would_start_if == "16 a100 GPUs free up under one leaf switch"


def test_a_same_spine_gang_that_fits_a_spine_later_gets_that_time():
    plan = (
        make_cluster().nodes(2, leaf="A", spine="S").nodes(2, leaf="B", spine="T", start=2).at(0)
        .running(make_running(make_job("r0").gpus(8).limit(1800)).whole("n0"),
                 make_running(make_job("r2").gpus(8).limit(900)).whole("n2"))
        .pending(make_job("t").gpus(12).per_node(4).topology("same_spine").limit(3600))
        .plan(NO_BACKFILL)
    )
    t = why(plan, "t")
    assert t.code is ReasonCode.TOPOLOGY_UNSATISFIED
    assert "16 a100 GPUs free, but no single spine has room for all 12 (at most 8 free under " \
           "one)." in t.message
    assert t.eta == 900.0  # spine T is whole first


def test_a_same_leaf_gang_short_of_gpus_gets_the_time_one_leaf_has_them():
    # every GPU is busy: n0 (leaf A) and n2 (leaf B) free at t=3600, n1 and n3 at t=7200.
    # The fleet has 16 free at t=3600, one leaf only at t=7200 (the estimate said t=3600).
    def plan(topology: str):
        return (make_cluster().nodes(4, per_leaf=2).at(0)
                .running(*(make_running(make_job(f"r{k}").gpus(8).limit(3600 * (1 + k % 2)))
                           .whole(f"n{k}") for k in range(4)))
                .pending(make_job("t").gpus(16).per_node(8).topology(topology).limit(3600))
                .plan(NO_BACKFILL))

    assert why(plan("any"), "t").eta == 3600.0
    t = why(plan("same_leaf"), "t")
    assert t.code is ReasonCode.INSUFFICIENT_GPUS
    assert t.eta == 7200.0
    assert t.message.endswith("Estimated start t=7200, when one leaf switch has room for all 16 "
                              "(by runtime limits).")
    assert why(plan("same_spine"), "t").eta == 3600.0  # both leaves sit under spine s0


def test_a_job_on_down_nodes_that_is_also_over_quota_says_both():
    # Before: only "all 1 nodes that could host it are not ready": the node coming back would
    # not have started it.
    plan = (
        make_cluster().nodes(1).nodes(1, gpu_type="h100", prefix="h", state=NodeState.DOWN)
        .quota("ml", "h100", 4).at(0)
        .running(make_running(make_job("r").gpus(4).types("h100").limit(3600))
                 .on("h0", 0, 1, 2, 3))
        .pending(make_job("t").gpus(4).types("h100").limit(3600))
        .plan(NO_BACKFILL)
    )
    t = why(plan, "t")
    assert t.code is ReasonCode.NODE_NOT_READY
    assert t.message.endswith(
        "It is also over quota: team ml uses 4 of 4 nominal h100 GPUs and can borrow 0 more (no cohort to borrow from); "
        "this job needs 4.")
    assert t.would_start_if == "a capable node returns to ready, and team ml frees 4 h100 GPUs"


def test_a_job_on_down_nodes_within_its_quota_only_waits_for_the_nodes():
    plan = (
        make_cluster().nodes(1).nodes(1, gpu_type="h100", prefix="h", state=NodeState.DOWN)
        .quota("ml", "h100", 8).at(0)
        .pending(make_job("t").gpus(4).types("h100").limit(3600))
        .plan(NO_BACKFILL)
    )
    t = why(plan, "t")
    assert t.code is ReasonCode.NODE_NOT_READY
    assert "quota" not in t.message
    assert t.would_start_if == "a capable node returns to ready"


def test_a_job_that_can_never_run_and_is_over_quota_is_told_it_can_never_run():
    # Feasibility before fairness: no h100 exists, whatever the quota says.
    plan = (
        make_cluster().nodes(1).quota("ml", "a100", 4).at(0)
        .running(make_running(make_job("r").gpus(4).limit(3600)).on("n0", 0, 1, 2, 3))
        .pending(make_job("t").gpus(8).types("h100"))
        .plan()
    )
    t = why(plan, "t")
    assert t.code is ReasonCode.CAN_NEVER_RUN and not t.resolvable
    assert t.message == ("Can never run on this fleet: it needs GPUs of type h100; the fleet has "
                         "a100 (80 GB).")
    assert t.eta is None


def test_a_reservation_on_one_node_says_one_node():
    plan = (
        make_cluster().nodes(1).at(0)
        .running(make_running(make_job("r").gpus(8).limit(3600)).whole("n0"))
        .pending(make_job("j").gpus(8).limit(3600))
        .plan()
    )
    j = why(plan, "j")
    assert j.code is ReasonCode.WAITING_FOR_RESERVATION
    assert j.message.startswith("Holds a reservation for 8 GPUs on 1 node from t=3600,")
    assert j.eta == 3600.0
    assert [(r.job_id, r.start_at) for r in plan.reservations] == [("j", 3600.0)]


def test_a_job_behind_the_head_names_it_and_its_start():
    plan = (
        make_cluster().nodes(2).at(0)
        .running(make_running(make_job("r0").gpus(4).limit(3600)).on("n0", 0, 1, 2, 3),
                 make_running(make_job("r1").gpus(8).limit(3600)).whole("n1"))
        .pending(make_job("head").gpus(16).limit(3600).submitted(0),
                 make_job("long").gpus(4).limit(7200).submitted(1))
        .plan()
    )
    head, long = why(plan, "head"), why(plan, "long")
    assert head.code is ReasonCode.WAITING_FOR_RESERVATION and head.eta == 3600.0
    assert long.code is ReasonCode.BEHIND_HIGHER_PRIORITY
    assert long.message.startswith(
        "It fits only on GPUs reserved for job head, which starts at t=3600; its runtime limit of "
        "2 h ends after that, so starting now would delay it.")
    assert long.queue_position > head.queue_position
    assert long.eta == 7200.0  # when the head has run on the two nodes


def test_a_preemption_notice_names_one_gpu_in_the_singular():
    """It read "with its 1 a100 GPUs" (h50's walk through the demo, 5 Dec)."""
    plan = (
        make_cluster().nodes(1).at(5000)
        .running(*(make_running(make_job(f"v{i}").priority("low").gpus(1).limit(20000))
                   .on("n0", i).started(1000).checkpointed(4000) for i in range(8)))
        .pending(make_job("h").priority("high").gpus(1).limit(3600))
        .plan()
    )
    [notice] = plan.preemptions
    # (and "to free them" for its preemptor's one GPU until 5 Dec: test_engine_count_words.py)
    assert "stops whole to free it, with its 1 a100 GPU. It has" in notice.message


def test_a_preemption_notice_carries_grace_reason_and_the_gpu_hours_it_loses():
    plan = (
        make_cluster().nodes(1).at(5000)
        .priority("low", 10, grace_period_s=45)
        .running(make_running(make_job("v").priority("low").gpus(8).limit(20000)
                              .restart_cost(360))
                 .whole("n0").started(1000).checkpointed(4000))
        .pending(make_job("h").priority("high").gpus(8).limit(3600))
        .plan()
    )
    [notice] = plan.preemptions
    # 8 GPUs x (1000 s since the checkpoint + 360 s to restart) = 3.0222 GPU-hours
    assert notice.grace_period_s == 45
    assert notice.reason.value == "higher_priority" and notice.for_job == "h"
    assert abs(notice.lost_gpu_hours - 8 * 1360 / 3600) < 1e-6
    # Before: "About 3.02 GPU-hours since its last checkpoint are lost; it has 45 s to
    # checkpoint", though a job that checkpoints in its grace period loses only its restart
    assert notice.message == (
        "Preempted: higher-priority job h (high, 1000) needs 8 GPUs, and this job (low, 10) "
        "stops whole to free them, with its 8 a100 GPUs. It has "
        "45 s to checkpoint and stop, then requeues; without a checkpoint in that time it loses "
        "about 3.02 GPU-hours (its work since its last checkpoint, and its restart).")
    h = why(plan, "h")
    assert h.code is ReasonCode.WAITING_FOR_PREEMPTION and h.eta == 5045.0
    assert h.message == ("Preempting job v to start on 8 GPUs; it starts once they have stopped, "
                         "by t=5045.")


def test_queue_positions_count_only_the_jobs_still_waiting():
    # Before: 3 and 4, counting the two jobs this very cycle started (the control plane stored
    # "#3" for a job with no job waiting ahead of it, until the next cycle).
    plan = (
        make_cluster().nodes(1).at(0)
        .pending(make_job("a").gpus(4).limit(600).submitted(0),
                 make_job("b").gpus(4).limit(600).submitted(1),
                 make_job("c").gpus(8).limit(600).submitted(2),
                 make_job("d").gpus(8).limit(600).submitted(3))
        .plan()
    )
    assert sorted(b.job_id for b in plan.binds) == ["a", "b"]
    assert [(p.job_id, p.queue_position) for p in plan.pending] == [("c", 1), ("d", 2)]


def test_idle_gpus_held_for_a_reservation_are_named_not_called_free():
    # n0 has 4 idle GPUs, held for the head (16 GPUs from t=7200). Before: "Needs 8 a100 GPUs;
    # 0 are free." while the node page showed 4 idle GPUs.
    plan = (
        make_cluster().nodes(2).at(0)
        .running(make_running(make_job("r0").gpus(4).limit(3600)).on("n0", 0, 1, 2, 3),
                 make_running(make_job("r1").gpus(8).limit(7200)).whole("n1"))
        .pending(make_job("head").gpus(16).limit(3600).submitted(0),
                 make_job("j1").gpus(8).limit(10000).submitted(1))
        .plan()
    )
    assert [(r.job_id, r.start_at) for r in plan.reservations] == [("head", 7200.0)]
    j1 = why(plan, "j1")
    assert j1.code is ReasonCode.INSUFFICIENT_GPUS
    assert j1.message.startswith(
        "Needs 8 a100 GPUs; 0 are free (4 more are idle, held for job head's reservation).")
    assert plan.fleet.reserved_gpus == 4 and plan.fleet.free_gpus == 0


def test_preemption_notice_tells_the_preemptors_need_apart_from_the_victims_gang():
    # h needs 8; v's 16-GPU gang stops whole. Before: "h needs its 16 a100 GPUs", as if h
    # needed 16.
    plan = (
        make_cluster().nodes(2).at(5000)
        .priority("high", 1000).priority("low", 10, grace_period_s=45)
        .running(make_running(make_job("v").priority("low").gpus(16).limit(20000)).whole("n0", "n1")
                 .started(1000))
        .pending(make_job("h").priority("high").gpus(8).limit(3600))
        .plan()
    )
    [notice] = plan.preemptions
    assert notice.message.startswith(
        "Preempted: higher-priority job h (high, 1000) needs 8 GPUs, and this job (low, 10) stops whole to "
        "free them, with its 16 a100 GPUs.")
