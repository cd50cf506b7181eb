"""Rule 2, gangs all or nothing: a rigid job gets its whole group at once or holds nothing,
heterogeneous gangs (roles of different shapes) included."""

from __future__ import annotations

import pytest
from engine_builders import bound, gpu_count, make_cluster, make_job, make_running, role, why
from test_engine_explain_eta import NO_BACKFILL, evolve

from scheduler_core import GangRole, ReasonCode, SchedulerConfig


def test_seed_demo_two_32_gpu_gangs_on_48_free_gpus_one_runs_the_other_holds_nothing():
    plan = (
        make_cluster().nodes(6)
        .pending(make_job("A").gpus(32).per_node(8).submitted(0),
                 make_job("B").gpus(32).per_node(8).submitted(1))
        .plan()
    )
    assert list(bound(plan)) == ["A"]
    assert gpu_count(bound(plan)["A"]) == 32
    assert len({p.node for p in bound(plan)["A"]}) == 4
    # B holds nothing: no bind, no resize, and the GPUs it cannot use are reported free
    assert "B" not in bound(plan)
    assert plan.fleet.allocated_gpus == 32
    assert plan.fleet.free_gpus + plan.fleet.reserved_gpus == 16
    assert why(plan, "B").code in (ReasonCode.INSUFFICIENT_GPUS,
                                   ReasonCode.WAITING_FOR_RESERVATION)


@pytest.mark.parametrize(
    ("free_nodes", "gang_nodes", "binds"),
    [(3, 4, False), (4, 4, True), (1, 2, False)],
    ids=["three-of-four-nodes-free-binds-nothing", "all-four-free-binds-all",
         "one-of-two-free-binds-nothing"],
)
def test_gang_is_all_or_nothing(free_nodes, gang_nodes, binds):
    plan = (
        make_cluster().nodes(free_nodes)
        .pending(make_job("g").gpus(8 * gang_nodes).per_node(8))
        .plan()
    )
    if binds:
        assert gpu_count(bound(plan)["g"]) == 8 * gang_nodes
    else:
        assert plan.binds == ()
        assert plan.fleet.allocated_gpus == 0


def test_job_of_at_least_one_node_takes_whole_nodes():
    # Two half-used nodes hold 8 free GPUs between them, but a 16-GPU job needs whole nodes.
    plan = (
        make_cluster().nodes(4)
        .running(make_running(make_job("r1").gpus(4)).on("n0", 0, 1, 2, 3),
                 make_running(make_job("r2").gpus(4)).on("n1", 0, 1, 2, 3))
        .pending(make_job("j").gpus(16))
        .plan()
    )
    assert sorted(p.node for p in bound(plan)["j"]) == ["n2", "n3"]
    assert all(len(p.gpu_indices) == 8 for p in bound(plan)["j"])


def test_heterogeneous_gang_roles_are_admitted_together():
    job = make_job("het").roles(role("ps", 1, 2, "t4"), role("worker", 2, 8, "a100"))
    plan = (
        make_cluster().nodes(2, gpu_type="a100").nodes(1, prefix="t", gpu_type="t4")
        .pending(job)
        .plan()
    )
    placements = bound(plan)["het"]
    by_role: dict[str, list[str]] = {}
    for p in placements:
        by_role.setdefault(p.role, []).append(p.node)
    assert sorted(by_role["worker"]) == ["n0", "n1"]
    assert by_role["ps"] == ["t0"]
    assert gpu_count(placements) == 18


def test_heterogeneous_gang_waits_whole_when_one_role_cannot_fit():
    job = make_job("het").roles(role("ps", 1, 2, "t4"), role("worker", 2, 8, "a100"))
    plan = (
        make_cluster().nodes(2, gpu_type="a100").nodes(1, prefix="t", gpu_type="t4")
        .running(make_running(make_job("busy").gpus(8).types("t4")).whole("t0"))
        .pending(job)
        .plan()
    )
    assert "het" not in bound(plan)
    assert plan.fleet.allocated_gpus == 8  # only the job that was already running
    assert why(plan, "het").resolvable


def test_heterogeneous_gang_with_an_impossible_role_can_never_run():
    job = make_job("het").roles(role("ps", 1, 2, "b200"), role("worker", 1, 8, "a100"))
    plan = make_cluster().nodes(2).pending(job).plan()
    assert why(plan, "het").code is ReasonCode.CAN_NEVER_RUN


def test_same_node_heterogeneous_gang_lands_on_one_node():
    job = make_job("het").topology("same_node").roles(role("ps", 1, 1), role("worker", 1, 2))
    plan = (
        make_cluster().nodes(2, gpus=4)
        .running(make_running(make_job("r").gpus(2)).on("n0", 0, 1))
        .pending(job)
        .plan()
    )
    assert {p.node for p in bound(plan)["het"]} == {"n1"}
    assert sorted(len(p.gpu_indices) for p in bound(plan)["het"]) == [1, 2]


def test_same_node_gang_larger_than_any_node_can_never_run():
    job = make_job("het").topology("same_node").roles(role("ps", 1, 2), role("worker", 1, 4))
    plan = make_cluster().nodes(2, gpus=4).pending(job).plan()
    assert why(plan, "het").code is ReasonCode.CAN_NEVER_RUN
    assert "6 GPUs on one node" in why(plan, "het").message


def _a100_and_h100_with_quota_on_h100_only():
    return (make_cluster().node("n0", gpu_type="a100").node("n1", gpu_type="h100")
            .quota("ml", "a100", 0).quota("ml", "h100", 8))


def test_heterogeneous_gang_starts_on_the_gpu_type_its_quota_admits():
    # ps + 3 workers (7 GPUs), any device: the placer chose n0's a100, the quota refused it
    # (no a100 quota) and the search ended there, so the gang never started on an empty fleet
    # and was told "16 a100/h100 GPUs free, but spread too thinly".
    plan = (_a100_and_h100_with_quota_on_h100_only()
            .pending(make_job("g").roles(role("ps", 1, 1), role("w", 3, 2)))
            .plan())
    assert sorted({p.node for p in bound(plan)["g"]}) == ["n1"]


def test_heterogeneous_gang_is_reserved_on_the_gpu_type_its_quota_admits():
    # n1 (h100) is ops' until t=3600; n0 (a100) has 7 GPUs free, but ml has no a100 quota.
    # The gang's reservation was planned on n0 (the fuller node), where its quota refuses it.
    plan = (_a100_and_h100_with_quota_on_h100_only().at(10)
            .quota("ops", "h100", 8).quota("ops", "a100", 8)
            .running(make_running(make_job("x").team("ops").gpus(8).limit(3600)).whole("n1").started(0),
                     make_running(make_job("y").team("ops").gpus(1).limit(86400)).on("n0", 7).started(0))
            .pending(make_job("g").roles(role("ps", 1, 1), role("w", 3, 2)))
            .plan())
    assert "g" not in bound(plan)
    [reservation] = plan.reservations
    assert (reservation.start_at, {p.node for p in reservation.placements}) == (3600.0, {"n1"})


def test_heterogeneous_gang_beyond_what_its_quota_could_ever_hold_can_never_run():
    # ml has no a100 quota and 1 h100 GPU: a 3-GPU gang could never start, but its option
    # mixing types was never checked against quota before placement, so it was told it waits
    # for GPUs and held the head's reservation, keeping GPUs from other jobs for ever.
    plan = (make_cluster().node("n0", gpu_type="a100").node("n1", gpu_type="h100")
            .quota("ml", "a100", 0).quota("ml", "h100", 1)
            .pending(make_job("g").roles(role("ps", 1, 2), role("w", 1, 1)))
            .plan())
    assert plan.reservations == ()
    assert (why(plan, "g").code, why(plan, "g").resolvable) == (ReasonCode.CAN_NEVER_RUN, False)


def test_heterogeneous_gang_whose_role_needs_a_gpu_type_its_team_has_no_quota_for_can_never_run():
    # its parameter server runs only on h100, where ml's quota is 0; 8 a100 GPUs of quota
    # cover the gang's size, but not that member
    plan = (make_cluster().node("n0", gpu_type="a100").node("n1", gpu_type="h100")
            .quota("ml", "a100", 8).quota("ml", "h100", 0)
            .pending(make_job("g").roles(role("ps", 1, 1, "h100"), role("w", 1, 2)))
            .plan())
    assert "g" not in bound(plan) and plan.reservations == ()
    assert (why(plan, "g").code, why(plan, "g").resolvable) == (ReasonCode.CAN_NEVER_RUN, False)


def test_heterogeneous_gang_reserved_on_one_node_is_told_one_node():
    # its ps and its workers are two placements on n0: the sentence counted placements
    plan = (make_cluster().nodes(1).at(10)
            .running(make_running(make_job("x").gpus(8).limit(3600)).whole("n0").started(0))
            .pending(make_job("g").roles(role("ps", 1, 1), role("w", 3, 2)))
            .plan())
    [reservation] = plan.reservations
    assert len(reservation.placements) == 2
    assert "Holds a reservation for 7 GPUs on 1 node from t=3600" in why(plan, "g").message


def _a100_and_h100_with_4_of_quota_on_each():
    return (make_cluster().node("n0", gpu_type="a100").node("n1", gpu_type="h100")
            .quota("ml", "a100", 4).quota("ml", "h100", 4))


def test_heterogeneous_gang_that_no_one_type_quota_holds_starts_split_across_types_within_each():
    # ps + 3 workers of 2 (7 GPUs), any device, 4 of quota on each type: neither type alone
    # holds it, mixing does. The placer mixed freely and the quota refused its choice, and the
    # gang was told "16 a100/h100 GPUs free, but spread too thinly" on an empty fleet.
    plan = _a100_and_h100_with_4_of_quota_on_each().pending(make_job("g").roles(role("ps", 1, 1), role("w", 3, 2))).plan()
    per_node = {}
    for p in bound(plan)["g"]:
        per_node[p.node] = per_node.get(p.node, 0) + len(p.gpu_indices)
    assert per_node == {"n0": 4, "n1": 3}


def test_heterogeneous_gang_is_reserved_split_within_each_types_quota():
    # n1 (h100) is ops' until t=3600: the gang's reservation put all 7 GPUs on n1, 3 more than
    # ml's h100 quota, a promise its quota would refuse at t=3600. It is now 4 a100 + 3 h100.
    plan = (_a100_and_h100_with_4_of_quota_on_each().at(10).quota("ops", "h100", 8)
            .running(make_running(make_job("x").team("ops").gpus(8).limit(3600)).whole("n1").started(0))
            .pending(make_job("g").roles(role("ps", 1, 1), role("w", 3, 2)))
            .plan())
    [reservation] = plan.reservations
    per_node = {}
    for p in reservation.placements:
        per_node[p.node] = per_node.get(p.node, 0) + len(p.gpu_indices)
    assert (reservation.start_at, per_node) == (3600.0, {"n0": 4, "n1": 3})


def test_heterogeneous_gang_whose_member_no_types_quota_holds_can_never_run_and_is_told_why():
    # a member of 4 GPUs, 3 of quota on each type (no cohort): 3 + 3 would hold the gang's 6,
    # but no split of its members does. It was told "spread too thinly", resolvable.
    plan = (make_cluster().node("n0", gpu_type="a100").node("n1", gpu_type="h100")
            .quota("ml", "a100", 3).quota("ml", "h100", 3)
            .pending(make_job("g").roles(role("a", 1, 4), role("b", 1, 2)))
            .plan())
    assert "g" not in bound(plan) and plan.reservations == ()
    assert (why(plan, "g").code, why(plan, "g").resolvable) == (ReasonCode.CAN_NEVER_RUN, False)
    assert why(plan, "g").message.endswith(
        "this job needs 6, and mixing types, no split of its members (the largest of 4 GPUs) fits each type's quota.")


def _ml_using_6_of_8_on_each_type(*running):
    """Two a100 and two h100 nodes; team ml holds 6 of its 8 GPUs of quota on each type with
    jobs that declare no runtime limit (its quotas admit 2 more of each as long as they run)."""
    return (make_cluster().nodes(2, gpu_type="a100", prefix="a").nodes(2, gpu_type="h100", prefix="h")
            .quota("ml", "a100", 8).quota("ml", "h100", 8).quota("ops", "a100", 8).quota("ops", "h100", 8)
            .running(make_running(make_job("xa").team("ml").gpus(6).limit(None)).on("a0", *range(6)),
                     make_running(make_job("xh").team("ml").gpus(6).limit(None)).on("h0", *range(6)),
                     *running))


def test_heterogeneous_gang_its_quotas_hold_only_without_its_teams_running_jobs_is_told_its_quota():
    # 7 GPUs (ps + 3 workers of 2), any device: each quota could hold it (8), but beside ml's
    # running jobs they admit 2 a100 + 2 h100 now. It was told "20 a100/h100 GPUs free, but
    # spread too thinly": the mixed option was placed freely and its quota refused the choice.
    plan = _ml_using_6_of_8_on_each_type().pending(
        make_job("g").team("ml").roles(role("ps", 1, 1), role("w", 3, 2))).plan()
    assert "g" not in bound(plan) and plan.reservations == ()
    w = why(plan, "g")
    assert w.code is ReasonCode.QUOTA_EXCEEDED
    assert "6 of 8 nominal a100 GPUs" in w.message and "6 of 8 nominal h100 GPUs" in w.message
    assert "mixing types, no split of its members (the largest of 2 GPUs) fits what each type's quota admits now" in w.message


def test_heterogeneous_gang_is_not_reserved_gpus_its_quota_cannot_hold_while_its_teams_jobs_run():
    # As above, with ops's jobs on a1 and h1 until t=3600: the gang was promised all 7 GPUs of
    # a1 from t=3600, while ml's quota admits 2 more a100 GPUs for as long as xa runs (no end)
    plan = _ml_using_6_of_8_on_each_type(
        make_running(make_job("oa").team("ops").gpus(8).limit(3600)).on("a1", *range(8)),
        make_running(make_job("oh").team("ops").gpus(8).limit(3600)).on("h1", *range(8)),
    ).pending(make_job("g").team("ml").roles(role("ps", 1, 1), role("w", 3, 2))).plan()
    assert plan.reservations == ()
    assert why(plan, "g").code is ReasonCode.QUOTA_EXCEEDED


def test_heterogeneous_gang_past_the_placement_budget_is_not_reserved_beyond_its_quota():
    # the same gang behind a job that binds with the cycle's one placement attempt: the gang,
    # untried, was given the reservation on the mixed option (7 GPUs of a1 from t=3600)
    plan = _ml_using_6_of_8_on_each_type(
        make_running(make_job("oa").team("ops").gpus(8).limit(3600)).on("a1", *range(8)),
        make_running(make_job("oh").team("ops").gpus(8).limit(3600)).on("h1", *range(8)),
    ).quota("dev", "a100", 8).pending(
        make_job("first").team("dev").gpus(1).submitted(0),
        make_job("g").team("ml").roles(role("ps", 1, 1), role("w", 3, 2)).submitted(1),
    ).plan(SchedulerConfig(max_placement_attempts=1))
    assert "first" in bound(plan) and plan.reservations == ()
    assert why(plan, "g").code is ReasonCode.QUOTA_EXCEEDED


def test_heterogeneous_gang_whose_role_only_a_governed_type_runs_is_not_reserved_beside_an_ungoverned_type():
    # the ps runs only on h100, which quotas govern (ops has 8) and ml has none of; the workers
    # may use a100 too, which no quota governs. With one type ungoverned the mixed option was
    # placed freely: on a busy fleet ml's gang was reserved a ps on h100 its quota never holds.
    plan = (make_cluster().node("a0", gpu_type="a100").node("h0", gpu_type="h100").at(10)
            .quota("ops", "h100", 8)
            .running(make_running(make_job("x").team("ops").gpus(8).limit(3600)).on("h0", *range(8)).started(0),
                     make_running(make_job("y").team("ops").gpus(8).limit(3600)).on("a0", *range(8)).started(0))
            .pending(make_job("g").team("ml").roles(role("ps", 1, 1, "h100"), role("w", 1, 2)))
            .plan())
    assert plan.reservations == ()
    w = why(plan, "g")
    assert w.code is ReasonCode.CAN_NEVER_RUN
    assert "team ml may hold at most 0 h100 GPUs" in w.message


# A packed heterogeneous gang (members may share a node) is told the start at which it is
# placed, each member on a node of its own classes with room for it: not the first release at
# which the GPUs of all its members' classes pooled together would hold it.
def eta_and_start(cluster) -> tuple[float | None, float | None]:
    first, starts = evolve(cluster.snapshot(), NO_BACKFILL)
    return why(first, "g").eta, starts.get("g")


def test_packed_role_gang_is_told_the_start_its_trainers_gpu_type_has_room():
    # a trainer of 4 h100 GPUs and two workers of 1 a100 GPU; n0 (a100) has 3 free until
    # t=1000, h0 (h100) 3 free until t=2000. Until 7 Dec, counted on a100 and h100 pooled,
    # it was told t=1000 (11 GPUs free, 8 on n0), when no h100 node has 4 free; it starts at
    # t=2000.
    cluster = (
        make_cluster().nodes(1).nodes(1, gpu_type="h100", prefix="h").at(0)
        .running(make_running(make_job("a").gpus(5).limit(1000)).on("n0", *range(5)),
                 make_running(make_job("b").types("h100").gpus(5).limit(2000)).on("h0", *range(5)))
        .pending(make_job("g").roles(role("trainer", 1, 4, "h100"), role("w", 2, 1, "a100")).limit(600))
    )
    assert eta_and_start(cluster) == (2000.0, 2000.0)


def test_packed_role_gang_is_told_the_start_a_node_has_room_for_its_trainers_cpus():
    # all a100: the trainer (4 GPUs) asks 8 CPUs a GPU, the two workers (1 GPU) none. n0's
    # 6 GPUs free at t=1000, but job h holds 60 of its 64 CPUs until t=3000; n1 is full until
    # t=2000. Until 7 Dec it was told t=1000 (the GPUs counted alone); the trainer starts on
    # n1 at t=2000.
    cluster = (
        make_cluster().nodes(2).at(0)
        .running(make_running(make_job("h").gpus(2).cpus_per_gpu(30).limit(3000)).on("n0", 0, 1),
                 make_running(make_job("a").gpus(6).limit(1000)).on("n0", *range(2, 8)),
                 make_running(make_job("b").gpus(8).limit(2000)).whole("n1"))
        .pending(make_job("g").roles(GangRole("trainer", 1, 4, (), 0, 8, 0), GangRole("w", 2, 1, (), 0, 0, 0))
                 .limit(600))
    )
    assert eta_and_start(cluster) == (2000.0, 2000.0)



# All or nothing must not refuse a gang that fits. Two h100 nodes; n1's running job leaves it 1
# or 2 of its 64 CPUs free. The gang: a member of 1 GPU asking 4 CPUs and one of 5 GPUs asking none. It
# fits now only with the 5-GPU member on n1 and the small one on n0. Until 7 Dec the placer
# put the larger member first where its score plugin liked it best, n0 (spread: 5 GPUs free
# on each node, the first; pack: n0 with 5 free is the best fit, n1 has 6), and then found no
# node for the small one: told its GPUs were "spread too thinly", it waited until t=1000.
@pytest.mark.parametrize(("workload", "free_on_n1"), [("serving", 5), ("training", 6)])
def test_packed_gang_that_fits_is_placed_even_where_its_largest_member_first_would_not(
        workload, free_on_n1):
    busy_on_n1 = 8 - free_on_n1
    cluster = (
        make_cluster().nodes(2, gpu_type="h100").at(0)
        .running(make_running(make_job("a").types("h100").gpus(3).limit(1000)).on("n0", 0, 1, 2),
                 make_running(make_job("b").types("h100").gpus(busy_on_n1).cpus_per_gpu(63 // busy_on_n1)
                              .limit(1000)).on("n1", *range(busy_on_n1)))
        .pending(make_job("g").roles(GangRole("small", 1, 1, ("h100",), 0, 4, 0),
                                     GangRole("big", 1, 5, ("h100",), 0, 0, 0))
                 .workload(workload).limit(600))
    )
    plan = cluster.plan()
    assert {p.role: p.node for p in bound(plan).get("g", [])} == {"small": "n0", "big": "n1"}


# Two members of 4 GPUs, each taking a100 or h100; team ml has 4 GPUs of quota on each type,
# so the cycle tries member a on a100 only and member b on h100 only (admission.quota_split).
# n0 and n1 (a100) free at t=1000, h0 (h100) at t=3000. Until 7 Dec its estimate took each
# member on every class among the split's it is capable of, both on a100 (n0, or n0 and n1 on
# distinct nodes), and told t=1000; it starts at t=3000, when h0 has room for b.
@pytest.mark.parametrize("distinct", [False, True], ids=["packed", "distinct-nodes"])
def test_role_gang_split_by_its_quota_is_told_the_start_of_the_split_it_is_tried_on(distinct):
    job = make_job("g").team("ml").roles(role("a", 1, 4, "a100", "h100"), role("b", 1, 4, "a100", "h100")).limit(600)
    cluster = (
        make_cluster().nodes(2).nodes(1, gpu_type="h100", prefix="h").at(0)
        .quota("ml", "a100", 4).quota("ml", "h100", 4).quota("ops", "a100", 16).quota("ops", "h100", 8)
        .running(make_running(make_job("a0").team("ops").gpus(8).limit(1000)).whole("n0"),
                 make_running(make_job("a1").team("ops").gpus(8).limit(1000)).whole("n1"),
                 make_running(make_job("b").team("ops").types("h100").gpus(8).limit(3000)).whole("h0"))
        .pending(job.distinct_nodes() if distinct else job)
    )
    first, starts = evolve(cluster.snapshot(), NO_BACKFILL)
    assert why(first, "g").code is ReasonCode.INSUFFICIENT_GPUS
    assert (why(first, "g").eta, starts.get("g")) == (3000.0, 3000.0)


# Two members of 8 GPUs, each taking a100 or h100; team ml may hold 8 a100 and 16 h100 GPUs.
# Its h100 option holds the whole gang; its mixed option, split by the a100 quota, puts a on
# a100 and b on h100 (admission.quota_split), offering b less than the h100 option, so the
# gang is explained on h100. n0 (a100) is free, h0 (h100) frees at t=1000, h1 at t=3000: it
# starts at t=1000 on n0 and h0. Until 7 Dec the split option was left out of its earliest
# start, and it was told t=3000, when both h100 nodes free.
@pytest.mark.parametrize("distinct", [False, True], ids=["packed", "distinct-nodes"])
def test_role_gang_explained_on_one_type_is_told_the_earlier_start_of_its_split_option(distinct):
    job = make_job("g").team("ml").roles(role("a", 1, 8, "a100", "h100"), role("b", 1, 8, "a100", "h100")).limit(600)
    cluster = (
        make_cluster().nodes(1).nodes(2, gpu_type="h100", prefix="h").at(0)
        .quota("ml", "a100", 8).quota("ml", "h100", 16).quota("ops", "h100", 16)
        .running(make_running(make_job("b0").team("ops").types("h100").gpus(8).limit(1000)).whole("h0"),
                 make_running(make_job("b1").team("ops").types("h100").gpus(8).limit(3000)).whole("h1"))
        .pending(job.distinct_nodes() if distinct else job)
    )
    first, starts = evolve(cluster.snapshot(), NO_BACKFILL)
    g = why(first, "g")
    assert g.code is ReasonCode.INSUFFICIENT_GPUS
    assert "It would start first on its a100/h100 GPUs, its members on different types" in g.message
    assert (g.eta, starts.get("g")) == (1000.0, 1000.0)
