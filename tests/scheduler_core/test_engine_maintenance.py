"""Maintenance windows (Slurm's maintenance reservations): a job may start on a node only if
its run, from its start to its runtime limit, overlaps no window of that node. The rule holds
for binds now, the head's reservation, a preemptor's fit and an elastic job's growth; a job
that only maintenance keeps waiting says so, with the window and when it ends."""

from __future__ import annotations

import pytest
from engine_builders import bound, bound_nodes, make_cluster, make_job, make_running, preempted, role, why
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler_core import ReasonCode, SchedulerConfig, SnapshotError, schedule

HOUR = 3600.0


def one_node_with_window(now: float = 0.0):
    """n0 goes into maintenance from t=3600 to t=7200."""
    return (make_cluster().nodes(1).at(now)
            .maintenance("7", "n0", start=HOUR, end=2 * HOUR, reason="firmware upgrade"))


@pytest.mark.parametrize(("limit", "starts"), [
    (1800, True), (3600, True), (3601, False), (None, False),
], ids=["ends-before-the-window", "ends-exactly-when-it-starts", "would-run-a-second-into-it",
        "no-runtime-limit"])
def test_maintenance_window_a_job_starts_on_the_node_only_if_it_ends_before(limit, starts):
    plan = one_node_with_window().pending(make_job("j").gpus(8).limit(limit)).plan()
    assert ("j" in bound(plan)) == starts


def test_maintenance_window_a_job_that_would_run_into_it_waits_and_says_why():
    plan = one_node_with_window().pending(make_job("j").gpus(4).limit(2 * HOUR)).plan()
    w = why(plan, "j")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert w.reason == "MaintenanceWindow"
    assert w.resolvable
    assert w.eta == 2 * HOUR
    assert "fit now on 1 node (n0), but maintenance window 7 (firmware upgrade) takes it out of service" in w.message
    assert "t=3600" in w.message and "t=7200" in w.message
    assert "would end it at t=7200" in w.message
    assert "runtime limit ending by t=3600" in w.would_start_if
    assert plan.fleet.pending_by_reason == {"MaintenanceWindow": 1}


# Each shape, the nodes its run would use (all of them: none but the window keeps it from
# starting) and those of them a window takes out of service. A 32-GPU gang needing 4 whole
# nodes was told "It would fit now on 1 node (n3)": only the node under the window was
# counted and named, as if the gang fitted on it.
@pytest.mark.parametrize(("nodes", "windows", "job", "said"), [
    (1, (("7", ("n0",), HOUR),), make_job("j").gpus(8),
     "It would fit now on 1 node (n0), but maintenance window 7 takes it out of service from "
     "t=3600 to t=7200,"),
    (4, (("3", ("n3",), HOUR),), make_job("j").gpus(32).per_node(8),
     "It would fit now on 4 nodes (n0, n1, n2, n3), but maintenance window 3 takes n3 out of "
     "service from t=3600 to t=7200,"),
    (2, (("3", ("n0", "n1"), HOUR),), make_job("j").gpus(16).per_node(8),
     "It would fit now on 2 nodes (n0, n1), but maintenance window 3 takes them out of service "
     "from t=3600 to t=7200,"),
    (6, (("3", ("n5",), HOUR),), make_job("j").gpus(48).per_node(8),
     "It would fit now on 6 nodes (n0, n1, n2, n3, …), but maintenance window 3 takes n5 out "
     "of service from t=3600 to t=7200,"),
    (7, (("3", ("n1", "n2", "n3", "n4", "n5"), HOUR),),
     make_job("j").gpus(56).per_node(8),
     "It would fit now on 7 nodes (n0, n1, n2, n3, …), but maintenance window 3 takes 5 of "
     "them (n1, n2, n3, n4, …) out of service from t=3600 to t=7200,"),
    (4, (("a", ("n1",), HOUR), ("b", ("n3",), 1.5 * HOUR)),
     make_job("j").gpus(32).per_node(8),
     "It would fit now on 4 nodes (n0, n1, n2, n3), but maintenance takes n1, n3 out of "
     "service (window a from t=3600 to t=7200; window b from t=5400 to t=9000),"),
    (2, (("3", ("n1",), HOUR),),
     make_job("j").roles(role("learner", 1, 8), role("rollout", 4, 2)),
     "It would fit now on 2 nodes (n0, n1), but maintenance window 3 takes n1 (rollout) out "
     "of service from t=3600 to t=7200,"),
    (2, (("3", ("n1",), HOUR),), make_job("j").elastic(16, 24),
     "It would fit now on 2 nodes (n0, n1), but maintenance window 3 takes n1 out of service "
     "from t=3600 to t=7200,"),
], ids=["single-node", "gang-one-node-of-four", "gang-every-node", "gang-wider-than-the-list",
        "gang-more-blocked-than-the-list", "gang-two-windows", "heterogeneous-gang",
        "elastic-at-its-minimum"])
def test_maintenance_reason_counts_every_node_a_gang_needs(nodes, windows, job, said):
    # free nodes; each window (id, its nodes, its start) lasts an hour; the job runs 3 h
    cluster = make_cluster().nodes(nodes).at(0)
    for window_id, names, start in windows:
        cluster.maintenance(window_id, *names, start=start, end=start + HOUR)
    plan = cluster.pending(job.limit(3 * HOUR).obj()).plan()
    w = why(plan, "j")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert w.message.startswith(said), w.message


def test_maintenance_window_a_job_without_a_runtime_limit_is_told_it_could_still_be_running():
    plan = one_node_with_window().pending(make_job("j").gpus(1)).plan()
    assert why(plan, "j").code is ReasonCode.MAINTENANCE_WINDOW
    assert "no runtime limit" in why(plan, "j").message


def test_maintenance_window_a_job_goes_to_a_node_outside_it():
    # best fit would take n0 (fuller); its window makes n1 the only place for a 2 h run
    plan = (make_cluster().nodes(2).at(0)
            .running(make_running(make_job("r").gpus(4).limit(10 * HOUR)).on("n0", 0, 1, 2, 3))
            .maintenance("m", "n0", start=HOUR, end=2 * HOUR)
            .pending(make_job("long").gpus(2).limit(2 * HOUR).submitted(0),
                     make_job("short").gpus(2).limit(HOUR / 2).submitted(1))
            .plan())
    assert bound_nodes(plan, "long") == ["n1"]
    assert bound_nodes(plan, "short") == ["n0"]  # packs where it ends in time


def test_maintenance_window_inside_it_nothing_starts_and_after_it_everything_may():
    job = make_job("j").gpus(1).limit(60)
    inside = one_node_with_window(now=HOUR + 10).pending(job).plan()
    assert "j" not in bound(inside)
    assert why(inside, "j").code is ReasonCode.MAINTENANCE_WINDOW
    after = one_node_with_window(now=2 * HOUR).pending(job).plan()
    assert bound_nodes(after, "j") == ["n0"]


def test_maintenance_window_idle_gpus_inside_it_are_unavailable_not_free():
    fleet = one_node_with_window(now=HOUR).nodes(1, start=1).plan().fleet
    assert fleet.unavailable_gpus == 8
    assert fleet.free_gpus == 8  # n1
    assert fleet.largest_free_block_by_pool == {"main": 8}
    before = one_node_with_window(now=0).nodes(1, start=1).plan().fleet
    assert (before.unavailable_gpus, before.free_gpus) == (0, 16)


def test_maintenance_window_a_gang_gets_all_its_nodes_or_nothing():
    plan = (make_cluster().nodes(2).at(0)
            .maintenance("m", "n1", start=HOUR, end=2 * HOUR)
            .pending(make_job("gang").gpus(16).per_node(8).limit(3 * HOUR))
            .plan())
    assert plan.binds == ()
    # the head's reservation waits for n1 to reopen
    [reservation] = plan.reservations
    assert reservation.start_at == 2 * HOUR
    w = why(plan, "gang")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW  # what keeps it waiting
    assert "holds a reservation for 16 GPUs from t=7200" in w.message
    assert w.eta == 2 * HOUR


def test_maintenance_window_the_head_reservation_starts_when_the_window_ends():
    plan = one_node_with_window(now=HOUR + 60).pending(
        make_job("head").gpus(8).limit(3 * HOUR)).plan()
    [reservation] = plan.reservations
    assert (reservation.job_id, reservation.start_at) == ("head", 2 * HOUR)
    assert {p.node for p in reservation.placements} == {"n0"}


def _window_head_with_a_movable_reservation():
    """n0 (free) goes into maintenance from t=3600 to t=7200; n1 has 4 GPUs busy until t=5000
    and 4 free; n2 6 busy until t=5000 and 2 free. "head" (8 GPUs, 2 h) would fit now on n0
    but for the window, and is reserved n1 from t=5000 (its job comes first among those
    ending then, as test_engine_backfill's two_draining_nodes). "small" (4 GPUs, 3 h) may not
    use n0 (its run overlaps the window) and fits only on n1's 4 free GPUs: it may start there
    only by moving the reservation to n2, where the head still starts at t=5000."""
    return (make_cluster().nodes(3).at(0)
            .running(make_running(make_job("ra").gpus(4).limit(5000)).on("n1", 0, 1, 2, 3),
                     make_running(make_job("rb").gpus(4).limit(5000)).on("n2", 0, 1, 2, 3),
                     make_running(make_job("rc").gpus(2).limit(5000)).on("n2", 4, 5))
            .maintenance("7", "n0", start=HOUR, end=2 * HOUR, reason="firmware upgrade")
            .pending(make_job("head").gpus(8).limit(2 * HOUR).submitted(0),
                     make_job("small").gpus(4).limit(3 * HOUR).submitted(1)))


@pytest.mark.parametrize(("moves", "reserved_on"), [(None, "n2"), (0, "n1")],
                         ids=["reservation-moved", "no-moves"])
def test_maintenance_window_a_head_keeps_saying_so_when_its_reservation_moves(moves, reserved_on):
    # The head's MaintenanceWindow words were put on its reason when it was reserved; "small"
    # moving the reservation to n2 later in the cycle worded the reason afresh, and they were
    # lost: it read WaitingForReservation, "Holds a reservation ... when running jobs reach
    # their runtime limits", with no word of the window that keeps it off n0 now.
    config = SchedulerConfig() if moves is None else SchedulerConfig(max_reservation_moves=moves)
    plan = _window_head_with_a_movable_reservation().plan(config)
    [reservation] = plan.reservations
    assert (reservation.job_id, reservation.start_at) == ("head", 5000)
    assert [p.node for p in reservation.placements] == [reserved_on]
    assert ("small" in bound(plan)) is (moves is None)
    w = why(plan, "head")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert w.eta == 5000
    assert w.message == (
        "It would fit now on 1 node (n0), but maintenance window 7 (firmware upgrade) takes it "
        "out of service from t=3600 to t=7200, and its runtime limit of 2 h would end it at "
        "t=7200. It may start there once the maintenance has ended, or earlier elsewhere as GPUs "
        "free up. It holds a reservation for 8 GPUs from t=5000; smaller jobs may use them only "
        "if they end before then.")
    assert w.would_start_if == ("the maintenance ends at t=7200, GPUs free up on other nodes, or "
                                "it declares a runtime limit ending by t=3600")
    assert plan.fleet.pending_by_reason.get("MaintenanceWindow", 0) == (1 if moves is None else 2)


def test_maintenance_window_the_head_reservation_avoids_a_node_its_run_would_overlap():
    # both nodes free at t=3600; n0 goes into maintenance at t=5000: a 2 h head goes to n1
    plan = (make_cluster().nodes(2).at(0)
            .running(make_running(make_job("r0").gpus(8).limit(HOUR)).whole("n0"),
                     make_running(make_job("r1").gpus(8).limit(HOUR)).whole("n1"))
            .maintenance("m", "n0", start=5000, end=9000)
            .pending(make_job("head").gpus(8).limit(2 * HOUR))
            .plan())
    [reservation] = plan.reservations
    assert reservation.start_at == HOUR
    assert {p.node for p in reservation.placements} == {"n1"}


def test_maintenance_window_backfill_may_use_the_nodes_until_it_starts():
    # the head waits for n1 after the window; a short job uses n0 now, a long one may not
    plan = (make_cluster().nodes(1).at(0)
            .maintenance("m", "n0", start=HOUR, end=2 * HOUR)
            .pending(make_job("head").gpus(8).limit(10 * HOUR).submitted(0),
                     make_job("short").gpus(4).limit(HOUR).submitted(1),
                     make_job("long").gpus(4).limit(HOUR + 1).submitted(2))
            .plan())
    assert plan.reservations[0].start_at == 2 * HOUR
    assert "short" in bound(plan)
    assert "long" not in bound(plan)


def test_maintenance_window_a_preemptor_does_not_evict_on_a_node_it_could_not_use():
    # r0 on n0 is the cheaper victim (started later), but n0's window would cut the
    # preemptor's run: it evicts r1 on n1
    plan = (make_cluster().nodes(2).at(10 * HOUR)
            .running(make_running(make_job("r0").priority("low").gpus(8)).whole("n0")
                     .started(9 * HOUR),
                     make_running(make_job("r1").priority("low").gpus(8)).whole("n1")
                     .started(HOUR))
            .maintenance("m", "n0", start=11 * HOUR, end=12 * HOUR)
            .pending(make_job("vip").priority("high").gpus(8).limit(4 * HOUR))
            .plan())
    assert [p.job_id for p in plan.preemptions] == ["r1"]


def test_maintenance_window_an_elastic_job_does_not_grow_onto_it():
    cluster = (make_cluster().nodes(2).at(0)
               .running(make_running(make_job("e").elastic(4, 16).limit(10 * HOUR))
                        .on("n0", 0, 1, 2, 3, 4, 5, 6, 7))
               )
    grows = cluster.plan()
    assert [r.job_id for r in grows.resizes] == ["e"]
    blocked = cluster.maintenance("m", "n1", start=HOUR, end=2 * HOUR).plan()
    assert blocked.resizes == ()


def test_maintenance_window_ended_windows_and_unknown_nodes_change_nothing():
    job = make_job("j").gpus(8).limit(2 * HOUR)
    plan = (make_cluster().nodes(1).at(3 * HOUR)
            .maintenance("old", "n0", start=0, end=HOUR)
            .maintenance("elsewhere", "gone-7", start=3 * HOUR, end=9 * HOUR)
            .pending(job).plan())
    assert bound_nodes(plan, "j") == ["n0"]


def test_maintenance_window_that_ends_before_it_starts_is_refused():
    snapshot = (make_cluster().nodes(1).maintenance("bad", "n0", start=HOUR, end=HOUR)
                .snapshot())
    with pytest.raises(SnapshotError, match="maintenance window 'bad'"):
        schedule(snapshot)


def test_maintenance_window_same_snapshot_same_plan():
    cluster = (make_cluster().nodes(4).at(0)
               .maintenance("a", "n0", "n1", start=HOUR, end=2 * HOUR)
               .maintenance("b", "n2", start=0, end=HOUR)
               .pending(*(make_job(f"j{i}").gpus(1 + i % 8).limit((i % 5) * HOUR or None)
                          .submitted(i) for i in range(20))))
    assert cluster.plan() == cluster.plan()


@settings(max_examples=60, deadline=None)
@given(
    windows=st.lists(st.tuples(st.integers(0, 3), st.integers(-2, 6), st.integers(1, 4)),
                     max_size=4),
    jobs=st.lists(st.tuples(st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([None, 1, 2, 3, 5])),
                  min_size=1, max_size=10),
    busy=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), max_size=3, unique_by=lambda b: b[0]),
)
def test_maintenance_window_invariant_no_run_overlaps_a_window_on_its_nodes(windows, jobs, busy):
    now = 10 * HOUR
    cluster = make_cluster().nodes(4).at(now)
    for i, (node, start_h, length_h) in enumerate(windows):
        cluster.maintenance(f"w{i}", f"n{node}", start=now + start_h * HOUR,
                            end=now + (start_h + length_h) * HOUR)
    for node, hours in busy:
        cluster.running(make_running(make_job(f"r{node}").gpus(8).limit(hours * HOUR))
                        .whole(f"n{node}").started(now - 60))
    specs = {}
    for i, (gpus, hours) in enumerate(jobs):
        spec = (make_job(f"j{i}").gpus(gpus).per_node(8 if gpus > 8 else None)
                .limit(None if hours is None else hours * HOUR).submitted(i).obj())
        specs[spec.id] = spec
        cluster.pending(spec)
    snapshot = cluster.snapshot()
    plan = schedule(snapshot)

    def overlaps(node: str, start: float, limit: float | None) -> bool:
        end = float("inf") if limit is None else start + limit
        return any(node in w.nodes and w.start_at < end and w.end_at > start
                   for w in snapshot.maintenance)

    for b in plan.binds:
        for p in b.placements:
            assert not overlaps(p.node, now, specs[b.job_id].runtime_limit_s), (b, snapshot.maintenance)
    for r in plan.reservations:
        for p in r.placements:
            assert not overlaps(p.node, r.start_at, specs[r.job_id].runtime_limit_s), (r, snapshot.maintenance)


def test_maintenance_window_eta_counts_a_node_in_maintenance_only_once_it_reopens():
    # n0 is in maintenance until t=7200; n1 frees at t=3600: a 16-GPU gang can start at
    # t=7200, not when n1 frees (the release timeline once counted n0's GPUs free now)
    plan = (make_cluster().nodes(2).at(HOUR / 2)
            .running(make_running(make_job("r").gpus(8).limit(HOUR)).whole("n1"))
            .maintenance("m", "n0", start=0, end=2 * HOUR)
            .pending(make_job("gang").gpus(16).per_node(8).limit(HOUR))
            .plan(SchedulerConfig(backfill=False)))
    w = why(plan, "gang")
    assert w.code is ReasonCode.INSUFFICIENT_GPUS
    assert w.eta == 2 * HOUR


def test_maintenance_window_a_preemptor_counts_the_victims_grace_before_its_start():
    # the victim's class gives it 30 s to stop: a 4 h run starting then would overlap a
    # window opening 4 h 10 s from now
    cluster = (make_cluster().nodes(1).at(10 * HOUR)
               .priority("low", 10, grace_period_s=30)
               .running(make_running(make_job("r").priority("low").gpus(8)).whole("n0")
                        .started(9 * HOUR))
               .pending(make_job("vip").priority("high").gpus(8).limit(4 * HOUR)))
    assert preempted(cluster.plan()) == ["r"]
    blocked = cluster.maintenance("m", "n0", start=14 * HOUR + 10, end=15 * HOUR).plan()
    assert preempted(blocked) == []


@pytest.mark.parametrize(("limit", "eta"), [
    (HOUR, 3 * HOUR), (HOUR / 2, HOUR), (None, 3 * HOUR),
], ids=["run-would-overlap-it", "run-ends-as-it-opens", "no-runtime-limit"])
def test_maintenance_window_eta_moves_past_a_window_the_run_would_overlap(limit, eta):
    # n0 frees at t=3600 and goes into maintenance at t=5400 until t=10800: a job behind
    # the running one is told it starts when n0 frees only if its run ends by t=5400
    plan = (make_cluster().nodes(1).at(0)
            .running(make_running(make_job("r").gpus(8).limit(HOUR)).whole("n0"))
            .maintenance("fw", "n0", start=1.5 * HOUR, end=3 * HOUR)
            .pending(make_job("j").gpus(8).limit(limit))
            .plan(SchedulerConfig(backfill=False)))
    w = why(plan, "j")
    assert w.code is ReasonCode.INSUFFICIENT_GPUS
    assert w.eta == eta
    if eta > HOUR:
        assert "would free up by t=3600, but maintenance (fw) takes 1 capable node out of service" in w.message


def test_maintenance_window_eta_uses_a_node_outside_the_window_when_one_frees():
    # both nodes free at t=3600; only n0 has a window: the job's ETA stays t=3600 (on n1)
    plan = (make_cluster().nodes(2).at(0)
            .running(make_running(make_job("a").gpus(8).limit(HOUR)).whole("n0"),
                     make_running(make_job("b").gpus(8).limit(HOUR)).whole("n1"))
            .maintenance("fw", "n0", start=1.5 * HOUR, end=3 * HOUR)
            .pending(make_job("j").gpus(8).limit(HOUR))
            .plan(SchedulerConfig(backfill=False)))
    assert why(plan, "j").eta == HOUR
    assert "maintenance" not in why(plan, "j").message


def test_maintenance_window_gpus_a_job_frees_inside_it_come_back_when_the_node_reopens():
    # r holds n0 until t=3600, but n0 is in maintenance until t=7200; n1 is busy until t=18000
    plan = (make_cluster().nodes(2).at(0)
            .running(make_running(make_job("r").gpus(8).limit(HOUR)).whole("n0"),
                     make_running(make_job("long").gpus(8).limit(5 * HOUR)).whole("n1"))
            .maintenance("m", "n0", start=0, end=2 * HOUR)
            .pending(make_job("j").gpus(8).limit(HOUR))
            .plan(SchedulerConfig(backfill=False)))
    assert why(plan, "j").eta == 2 * HOUR


def test_maintenance_window_eta_of_a_same_leaf_gang_needs_one_leaf_clear_of_windows():
    # every node frees at t=3600; n0 (leaf l0-0) and n2 (leaf l0-1) go into maintenance at
    # t=5400 until t=10800. Counted over the fleet, n1 and n3 hold the 16 GPUs of a 1 h run
    # from t=3600; under one leaf switch nothing is clear until the windows end
    def fleet(topology: str):
        return (make_cluster().nodes(4, per_leaf=2).at(0)
                .running(*(make_running(make_job(f"r{k}").gpus(8).limit(HOUR)).whole(f"n{k}")
                           for k in range(4)))
                .maintenance("a", "n0", start=1.5 * HOUR, end=3 * HOUR)
                .maintenance("b", "n2", start=1.5 * HOUR, end=3 * HOUR)
                .pending(make_job("g").gpus(16).per_node(8).limit(HOUR).topology(topology))
                .plan(SchedulerConfig(backfill=False)))

    assert why(fleet("any"), "g").eta == HOUR
    w = why(fleet("same_leaf"), "g")
    assert w.eta == 3 * HOUR
    assert "maintenance (a, b)" in w.message


def test_maintenance_window_eta_is_when_gpus_free_elsewhere_if_before_the_window_ends():
    # j fits now on n0 only, but n0 goes into maintenance at t=3600 until t=36000 and j runs
    # 2 h; n1 frees at t=1800. j is told t=1800, not the window's end (it was: a valid
    # bound ten hours late)
    plan = (make_cluster().nodes(2).at(0)
            .running(make_running(make_job("r").gpus(8).limit(HOUR / 2)).whole("n1"))
            .maintenance("fw", "n0", start=HOUR, end=10 * HOUR, reason="firmware")
            .pending(make_job("j").gpus(8).limit(2 * HOUR))
            .plan(SchedulerConfig(backfill=False)))
    w = why(plan, "j")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert w.eta == HOUR / 2
    assert "maintenance window fw (firmware) takes it out of service" in w.message
    assert "Estimated start t=1800: capable GPUs clear of the maintenance free up on other " \
           "nodes then (by runtime limits)." in w.message
    # with n1 busy past the window's end, the window's end stays the estimate
    later = (make_cluster().nodes(2).at(0)
             .running(make_running(make_job("r").gpus(8).limit(20 * HOUR)).whole("n1"))
             .maintenance("fw", "n0", start=HOUR, end=10 * HOUR)
             .pending(make_job("j").gpus(8).limit(2 * HOUR))
             .plan(SchedulerConfig(backfill=False)))
    assert why(later, "j").eta == 10 * HOUR
    assert "Estimated start" not in why(later, "j").message


def test_maintenance_window_eta_behind_the_head_counts_its_reservation():
    # the head takes half of n1 from t=1800 by its reservation; the next job of the same
    # shape fits beside it then, instead of waiting for n0's window to end
    plan = (make_cluster().nodes(2).at(0)
            .running(make_running(make_job("r").gpus(8).limit(HOUR / 2)).whole("n1"))
            .maintenance("fw", "n0", start=HOUR, end=10 * HOUR)
            .pending(make_job("head").gpus(4).limit(2 * HOUR).submitted(0),
                     make_job("next").gpus(4).limit(2 * HOUR).submitted(1))
            .plan())
    [reservation] = plan.reservations
    assert (reservation.job_id, reservation.start_at) == ("head", HOUR / 2)
    assert why(plan, "head").eta == HOUR / 2
    w = why(plan, "next")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert w.eta == HOUR / 2


def test_maintenance_window_eta_inside_an_open_window_is_when_gpus_free_elsewhere():
    # n0 is inside its window until t=36000 (its free GPUs count only from then); n1 frees at
    # t=1800: j is told t=1800, not the window's end
    plan = (make_cluster().nodes(2).at(0)
            .running(make_running(make_job("r").gpus(8).limit(HOUR / 2)).whole("n1"))
            .maintenance("fw", "n0", start=0, end=10 * HOUR)
            .pending(make_job("j").gpus(8).limit(2 * HOUR))
            .plan(SchedulerConfig(backfill=False)))
    w = why(plan, "j")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert w.eta == HOUR / 2
    assert "Estimated start t=1800: capable GPUs clear of the maintenance free up on other nodes" in w.message


def test_maintenance_window_eta_of_a_job_of_two_gpu_types_counts_its_other_type():
    # j accepts a100 or h100. It fits now only on the h100 node n0, which goes into
    # maintenance at t=3600 until t=36000, and j runs 2 h; the a100 node n1 frees at t=1800.
    # j is told t=1800 on its a100 GPUs, not the h100 window's end (it was: only the type
    # the window blocks was estimated)
    def plan(n1_free_at: float):
        return (make_cluster().node("n0", gpu_type="h100").node("n1", gpu_type="a100").at(0)
                .running(make_running(make_job("r").gpus(8).types("a100").limit(n1_free_at))
                         .whole("n1"))
                .maintenance("fw", "n0", start=HOUR, end=10 * HOUR, reason="firmware")
                .pending(make_job("j").gpus(8).types("h100", "a100").limit(2 * HOUR))
                .plan(SchedulerConfig(backfill=False)))
    w = why(plan(HOUR / 2), "j")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert w.eta == HOUR / 2
    assert "maintenance window fw (firmware) takes it out of service" in w.message
    assert "Estimated start t=1800: capable GPUs clear of the maintenance free up on other " \
           "nodes (its a100 GPUs) then (by runtime limits)." in w.message
    # with n1 busy past the window's end, the window's end stays the estimate
    later = why(plan(20 * HOUR), "j")
    assert later.code is ReasonCode.MAINTENANCE_WINDOW
    assert later.eta == 10 * HOUR
    assert "Estimated start" not in later.message


def test_maintenance_window_jobs_waiting_for_the_same_window_are_told_starts_one_after_another():
    # n0 goes into maintenance at t=3600 until t=7200; each job fits now but runs 2 h. The
    # first starts when the window ends; the second needs the same 8 GPUs, so only after
    # the first has run (both were told t=7200)
    plan = (one_node_with_window()
            .pending(make_job("first").gpus(8).limit(2 * HOUR).submitted(0),
                     make_job("second").gpus(8).limit(2 * HOUR).submitted(1))
            .plan(SchedulerConfig(backfill=False)))
    assert why(plan, "first").eta == 2 * HOUR
    w = why(plan, "second")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert w.eta == 4 * HOUR
    assert "Estimated start t=14400: the capable GPUs first run the jobs ahead of it" in w.message


def window_on_n0_and_n1_busy_with_first_waiting():
    """Two nodes: n0 in maintenance from t=3600 to 7200, n1 busy until t=10800; "first" (8
    GPUs for 2 h) waits for the window."""
    return (make_cluster().nodes(2).at(0)
            .running(make_running(make_job("r").gpus(8).limit(3 * HOUR)).on("n1", *range(8)))
            .maintenance("7", "n0", start=HOUR, end=2 * HOUR)
            .pending(make_job("first").gpus(8).limit(2 * HOUR).submitted(0)))


def test_maintenance_window_a_job_waiting_for_gpus_behind_one_waiting_for_the_window_leaves_its_run_room():
    # n0 goes into maintenance at t=3600 until t=7200; n1 is busy until t=10800. "first" (8
    # GPUs for 2 h) fits now on n0 but for the window: it starts there at t=7200 and runs to
    # t=14400. "wide" needs both nodes: their GPUs are all free at t=10800, but n0 is then
    # first's until t=14400 (it was told t=10800: the work ahead on its GPUs counted only the
    # jobs waiting for GPUs, not those waiting for the window)
    plan = (window_on_n0_and_n1_busy_with_first_waiting()
            .pending(make_job("wide").gpus(16).limit(2 * HOUR).submitted(1))
            .plan(SchedulerConfig(backfill=False)))
    assert why(plan, "first").code is ReasonCode.MAINTENANCE_WINDOW
    assert why(plan, "first").eta == 2 * HOUR
    w = why(plan, "wide")
    assert w.code is ReasonCode.INSUFFICIENT_GPUS
    assert w.eta == 4 * HOUR
    assert "Estimated start t=14400: the capable GPUs first run the jobs ahead of it" in w.message


def test_maintenance_window_a_job_waiting_for_it_is_work_ahead_of_the_jobs_behind_it():
    # As in the test above, "first" waits for the window on n0 and runs from t=7200 to 14400;
    # "w1" and "w2" each need both nodes for 2 h. w1 is told t=14400. w2 was told t=14400
    # too: the work ahead of it on the fleet's GPUs counted w1's (16 GPUs x 2 h) but not
    # first's. With first's (8 GPUs x 2 h) as well, the 172,800 GPU-seconds ahead run on 8
    # GPUs until n1 frees at t=10800 (86,400) and on 16 after: t=16200. (Its real start is
    # t=21600, after w1; the drain line is a fluid estimate, but no longer the same start as
    # the job ahead of it that needs the same whole fleet.)
    plan = (window_on_n0_and_n1_busy_with_first_waiting()
            .pending(make_job("w1").gpus(16).limit(2 * HOUR).submitted(1),
                     make_job("w2").gpus(16).limit(2 * HOUR).submitted(2))
            .plan(SchedulerConfig(backfill=False)))
    assert why(plan, "first").code is ReasonCode.MAINTENANCE_WINDOW
    assert why(plan, "w1").eta == 4 * HOUR
    w2 = why(plan, "w2")
    assert w2.code is ReasonCode.INSUFFICIENT_GPUS
    assert w2.eta == 16200
    assert "Estimated start t=16200: the capable GPUs first run the jobs ahead of it" in w2.message


def test_maintenance_window_jobs_that_fit_side_by_side_after_it_are_told_the_same_start():
    plan = (one_node_with_window()
            .pending(make_job("first").gpus(4).limit(2 * HOUR).submitted(0),
                     make_job("second").gpus(4).limit(2 * HOUR).submitted(1),
                     make_job("third").gpus(4).limit(2 * HOUR).submitted(2))
            .plan(SchedulerConfig(backfill=False)))
    assert [why(plan, j).eta for j in ("first", "second", "third")] == [2 * HOUR, 2 * HOUR, 4 * HOUR]


def test_maintenance_window_a_second_job_waiting_for_it_is_told_when_another_node_frees_while_the_first_runs():
    # n0 goes into maintenance at t=3600 until t=7200; n1 is busy until t=9000. "first" and
    # "second" (8 GPUs for 2 h each) both fit now on n0 but for the window. first runs on n0
    # from t=7200 to 14400; n1 frees at t=9000, clear of every window, so second starts there
    # then. It was told t=14400, the end of first's run: the release time between was not tried.
    def fleet(now, *running):
        return (make_cluster().nodes(2).at(now)
                .running(make_running(make_job("r").gpus(8).limit(2.5 * HOUR)).on("n1", *range(8)),
                         *running)
                .maintenance("7", "n0", start=HOUR, end=2 * HOUR))

    jobs = (make_job("first").gpus(8).limit(2 * HOUR).submitted(0),
            make_job("second").gpus(8).limit(2 * HOUR).submitted(1))
    plan = fleet(0).pending(*jobs).plan(SchedulerConfig(backfill=False))
    assert why(plan, "first").eta == 2 * HOUR
    w = why(plan, "second")
    assert w.code is ReasonCode.MAINTENANCE_WINDOW
    assert w.eta == 2.5 * HOUR
    assert "Estimated start t=9000:" in w.message
    # the engine starts it then: first on n0 when the window ends, second on n1 when r ends
    plan = fleet(2 * HOUR).pending(*jobs).plan(SchedulerConfig(backfill=False))
    assert bound_nodes(plan, "first") == ["n0"]
    assert why(plan, "second").eta == 2.5 * HOUR
    started_first = make_running(jobs[0]).on("n0", *range(8)).started(2 * HOUR)
    plan = (make_cluster().nodes(2).at(2.5 * HOUR).running(started_first)
            .maintenance("7", "n0", start=HOUR, end=2 * HOUR)
            .pending(jobs[1]).plan(SchedulerConfig(backfill=False)))
    assert bound_nodes(plan, "second") == ["n1"]


def test_maintenance_window_a_release_between_is_not_told_before_the_work_ahead_has_run():
    # As above, with "wide" (16 GPUs for 2 h) waiting for GPUs ahead of second in the queue:
    # the GPUs freeing at t=9000 go to the work ahead first (wide needs both nodes), so
    # second is not told t=9000
    plan = (make_cluster().nodes(2).at(0)
            .running(make_running(make_job("r").gpus(8).limit(2.5 * HOUR)).on("n1", *range(8)))
            .maintenance("7", "n0", start=HOUR, end=2 * HOUR)
            .pending(make_job("first").gpus(8).limit(2 * HOUR).submitted(0),
                     make_job("wide").gpus(16).limit(2 * HOUR).submitted(1),
                     make_job("second").gpus(8).limit(2 * HOUR).submitted(2))
            .plan(SchedulerConfig(backfill=False)))
    assert [p.job_id for p in plan.pending] == ["first", "wide", "second"]
    assert why(plan, "second").code is ReasonCode.MAINTENANCE_WINDOW
    assert why(plan, "second").eta > 2.5 * HOUR
