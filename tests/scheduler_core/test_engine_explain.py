"""Rule 9, explanations: every waiting job gets a typed code, a PascalCase reason and a sentence
with numbers, plus an ETA where one can be computed."""

from __future__ import annotations

import re

import pytest
from engine_builders import make_cluster, make_job, make_running, role, why

from scheduler_core import ReasonCode, SchedulerConfig


def fragmented():
    """Six nodes with 4 GPUs busy each: 24 GPUs free, none with 8 on one node."""
    cluster = make_cluster().nodes(6).at(100)
    for k in range(6):
        cluster.running(make_running(make_job(f"r{k}").gpus(4).limit(3600 + 600 * k))
                        .on(f"n{k}", 0, 1, 2, 3).started(0))
    return cluster


def test_fragmentation_is_explained_with_the_numbers():
    plan = fragmented().pending(make_job("j").gpus(8)).plan(SchedulerConfig(backfill=False))
    explanation = why(plan, "j")
    assert explanation.code is ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS
    assert explanation.reason == "InsufficientContiguousGpus"
    assert "24 a100 GPUs free, none with 8 on one node" in explanation.message
    assert explanation.would_start_if == "a node with 8 free a100 GPUs becomes available"
    assert explanation.resolvable


def _busy_nodes(nodes: int, busy: int):
    """``nodes`` nodes of 8 GPUs with ``busy`` of them held on each."""
    cluster = make_cluster().nodes(nodes).at(100)
    for k in range(nodes):
        cluster.running(make_running(make_job(f"r{k}").gpus(busy).limit(3600))
                        .on(f"n{k}", *range(busy)).started(0))
    return cluster


# No node has room for the gang's largest member: a single-node job waits for one node, a gang
# for as many as its members of that size need. A 16-GPU gang of two 8-GPU members was told
# it would start when "a node with 8 free a100 GPUs becomes available".
@pytest.mark.parametrize(("busy", "job", "said", "would"), [
    (4, make_job("j").gpus(8), "24 a100 GPUs free, none with 8 on one node (largest free block: 4).",
     "a node with 8 free a100 GPUs becomes available"),
    (4, make_job("j").gpus(16).per_node(8),
     "24 a100 GPUs free, none with 8 on one node (largest free block: 4); its gang needs 2 such "
     "nodes.", "2 nodes with 8 free a100 GPUs become available"),
    (4, make_job("j").gpus(24),
     "24 a100 GPUs free, none with 8 on one node (largest free block: 4); its gang needs 3 such "
     "nodes.", "3 nodes with 8 free a100 GPUs become available"),
    (4, make_job("j").elastic(16, 24),
     "24 a100 GPUs free, none with 8 on one node (largest free block: 4); its gang needs 2 such "
     "nodes.", "2 nodes with 8 free a100 GPUs become available"),
    (4, make_job("j").roles(role("learner", 2, 8), role("rollout", 2, 2)),
     "24 a100 GPUs free, none with 8 on one node (largest free block: 4); its gang needs 2 such "
     "nodes.", "2 nodes with 8 free a100 GPUs become available"),
    (5, make_job("j").gpus(16).per_node(4),
     "18 a100 GPUs free, none with 4 on one node (largest free block: 3); its gang has 4 members "
     "of that size.", "room for its 4 members of 4 a100 GPUs each frees up"),
], ids=["single-node", "gang-of-two-nodes", "unsplit-24-gpus", "elastic-at-its-minimum",
        "heterogeneous-gang", "members-that-may-share-a-node"])
def test_fragmentation_reason_counts_every_node_a_gang_needs(busy, job, said, would):
    plan = _busy_nodes(6, busy).pending(job).plan(SchedulerConfig(backfill=False))
    w = why(plan, "j")
    assert w.code is ReasonCode.INSUFFICIENT_CONTIGUOUS_GPUS
    assert w.message.startswith(said), w.message
    assert w.would_start_if == would


def _hogged_nodes(nodes: int, hogged: int, **hog: int):
    """``nodes`` nodes of 16 GPUs, 64 CPUs and 512 GB; on the last ``hogged`` of them a job
    holds 8 GPUs with 7 CPUs each (``cpus``) or 60 GB each (``memory``), leaving 8 GPUs free
    beside 8 CPUs or 32 GB."""
    cluster = make_cluster().nodes(nodes, gpus=16).at(100)
    for k in range(nodes - hogged, nodes):
        job = make_job(f"hog{k}").gpus(8).limit(3600)
        job = job.cpus_per_gpu(7) if "cpus" in hog else job.memory_per_gpu(60)
        cluster.running(make_running(job).on(f"n{k}", *range(8)).started(0))
    return cluster


# GPUs free but not the CPUs or memory beside them: a single-node job waits for one node's
# worth, a gang for as many of its members as find no room. A gang of four 8-GPU members with
# room for two was told it would start once "32 CPUs free up next to 8 free GPUs".
@pytest.mark.parametrize(("nodes", "hog", "job", "said", "would"), [
    (1, {"cpus": 7}, make_job("j").gpus(8).cpus_per_gpu(4),
     "1 node has 8 free GPUs but fewer than 32 free CPUs.", "32 CPUs free up next to 8 free GPUs"),
    (3, {"cpus": 7}, make_job("j").gpus(32).per_node(8).cpus_per_gpu(4),
     "2 nodes have 8 free GPUs but fewer than 32 free CPUs; there is room for 2 of its gang's 4 "
     "members of that size.", "32 CPUs free up next to 8 free GPUs for each of 2 more members"),
    (3, {"cpus": 7}, make_job("j").elastic(32, 48).per_node(8).cpus_per_gpu(4),
     "2 nodes have 8 free GPUs but fewer than 32 free CPUs; there is room for 2 of its gang's 4 "
     "members of that size.", "32 CPUs free up next to 8 free GPUs for each of 2 more members"),
    (3, {"cpus": 7}, make_job("j").cpus_per_gpu(4).roles(role("learner", 3, 8), role("rollout", 2, 2)),
     "2 nodes have 8 free GPUs but fewer than 32 free CPUs; there is room for 2 of its gang's 3 "
     "members of that size.", "32 CPUs free up next to 8 free GPUs for each of 1 more member"),
    (1, {"memory": 60}, make_job("j").gpus(8).memory_per_gpu(10),
     "1 node has 8 free GPUs but less than 80 GB of free memory.",
     "80 GB of memory frees up next to free GPUs"),
    (3, {"memory": 60}, make_job("j").gpus(32).per_node(8).memory_per_gpu(10),
     "2 nodes have 8 free GPUs but less than 80 GB of free memory; there is room for 2 of its "
     "gang's 4 members of that size.", "80 GB of memory frees up next to free GPUs for each of 2 more members"),
], ids=["cpus-single-node", "cpus-gang", "cpus-elastic-at-its-minimum", "cpus-heterogeneous-gang",
        "memory-single-node", "memory-gang"])
def test_cpu_and_memory_reasons_count_every_member_a_gang_needs(nodes, hog, job, said, would):
    plan = _hogged_nodes(nodes, 2 if nodes > 1 else 1, **hog).pending(job).plan(
        SchedulerConfig(backfill=False))
    w = why(plan, "j")
    assert w.code is (ReasonCode.INSUFFICIENT_CPU if "cpus" in hog else ReasonCode.INSUFFICIENT_MEMORY)
    assert w.message.startswith(said), w.message
    assert w.would_start_if == would


def test_eta_comes_from_the_running_jobs_runtime_limits():
    plan = fragmented().pending(make_job("j").gpus(8)).plan(SchedulerConfig(backfill=False))
    # the first node to become whole is n0, when r0 reaches its limit at t=3600
    assert why(plan, "j").eta == 3600.0
    assert "Estimated start t=3600" in why(plan, "j").message


def test_eta_is_none_when_no_runtime_limit_bounds_the_wait():
    plan = (
        make_cluster().nodes(1)
        .running(make_running(make_job("r").gpus(8)).whole("n0"))
        .pending(make_job("j").gpus(8))
        .plan()
    )
    assert why(plan, "j").eta is None


def test_quota_wait_eta_is_when_the_team_frees_enough():
    plan = (
        make_cluster().nodes(2).at(0)
        .quota("ml", "a100", 8)
        .running(make_running(make_job("a").team("ml").gpus(4).limit(1000)).on("n0", 0, 1, 2, 3),
                 make_running(make_job("b").team("ml").gpus(4).limit(5000)).on("n0", 4, 5, 6, 7))
        .pending(make_job("j").team("ml").gpus(4))
        .plan(SchedulerConfig(backfill=False))  # with backfill, j would hold a reservation
    )
    explanation = why(plan, "j")
    assert explanation.code is ReasonCode.QUOTA_EXCEEDED
    assert explanation.eta == 1000.0


@pytest.mark.parametrize(
    ("cluster", "job", "code", "pattern"),
    [
        (lambda: make_cluster().nodes(1).quota("ml", "a100", 0),
         make_job("j").gpus(1), ReasonCode.CAN_NEVER_RUN, r"may hold at most 0 a100 GPUs \(0 nominal"),
        (lambda: make_cluster().nodes(1).quota("ml", "a100", 4)
         .running(make_running(make_job("r").gpus(4)).on("n0", 0, 1, 2, 3)),
         make_job("j").gpus(2), ReasonCode.QUOTA_EXCEEDED,
         r"uses 4 of 4 nominal a100 GPUs and can borrow 0 more \(no cohort to borrow from\); this job needs 2"),
        (lambda: make_cluster().nodes(1),
         make_job("j").gpus(2).types("h100"), ReasonCode.CAN_NEVER_RUN,
         r"needs GPUs of type h100; the fleet has a100 \(80 GB\)"),
        (lambda: make_cluster().nodes(2)
         .running(make_running(make_job("r").gpus(12).per_node(6)).on("n0", *range(6))
                  .on("n1", *range(6))),
         make_job("j").gpus(6), ReasonCode.INSUFFICIENT_GPUS, r"Needs 6 a100 GPUs; 4 are free"),
        (lambda: make_cluster().nodes(1),
         make_job("j").gpus(0), ReasonCode.INVALID_REQUEST, r"gpus must be at least 1, got 0"),
        (lambda: make_cluster().nodes(1),
         make_job("j").gpus(2).elastic(4, 2), ReasonCode.INVALID_REQUEST,
         r"1 <= min_gpus <= max_gpus, got 4\.\.2"),
        (lambda: make_cluster().nodes(1),
         make_job("j").gpus(2).limit(-5), ReasonCode.INVALID_REQUEST,
         r"runtime_limit_s must be positive"),
    ],
    ids=["quota-that-can-never-cover-it", "over-quota-with-numbers", "no-capable-gpu-type",
         "not-enough-free-gpus", "zero-gpus-is-invalid", "inverted-elastic-range",
         "negative-runtime-limit"],
)
def test_every_reason_is_typed_pascal_case_and_has_numbers(cluster, job, code, pattern):
    plan = cluster().pending(job).plan()
    explanation = why(plan, "j")
    assert explanation.code is code
    assert explanation.reason == code.value
    assert re.fullmatch(r"[A-Z][A-Za-z]+", explanation.reason)
    assert re.search(pattern, explanation.message), explanation.message
    assert explanation.would_start_if


def test_every_waiting_job_is_explained_exactly_once_in_queue_order():
    cluster = fragmented()
    jobs = [make_job(f"j{k}").gpus(g).submitted(k)
            for k, g in enumerate([1, 8, 2, 16, 4, 64, 3, 8, 1, 2])]
    plan = cluster.pending(*jobs).plan()
    waiting = {j.obj().id for j in jobs} - {b.job_id for b in plan.binds}
    assert sorted(p.job_id for p in plan.pending) == sorted(waiting)
    # positions 1..n in queue order, jobs that can never run (the 64-GPU job) after every job
    # that can: a runnable job is not told it waits behind one that never starts
    can = [p.queue_position for p in plan.pending if p.resolvable]
    never = [p.queue_position for p in plan.pending if not p.resolvable]
    assert never and can == list(range(1, len(can) + 1))
    assert never == list(range(len(can) + 1, len(plan.pending) + 1))
    assert all(p.message and p.message.endswith(".") for p in plan.pending)


def test_jobs_beyond_the_cycles_placement_budget_are_still_explained():
    cluster = make_cluster().nodes(4)
    jobs = [make_job(f"j{k}").gpus(8).submitted(k).min_memory(k) for k in range(6)]
    plan = cluster.pending(*jobs).plan(SchedulerConfig(max_placement_attempts=2))
    assert sorted(b.job_id for b in plan.binds) == ["j0", "j1"]
    assert [p.job_id for p in plan.pending] == ["j2", "j3", "j4", "j5"]
    for p in plan.pending:
        assert p.code is ReasonCode.BEHIND_HIGHER_PRIORITY
        assert "Not tried this cycle: the cycle's 2 placement attempts" in p.message


def test_jobs_beyond_the_budget_that_share_a_gang_keep_their_own_team_position_and_note():
    # Past the placement budget outcomes are shared per (team, gang): jobs that differ only in
    # CPUs per GPU share one, but never across teams or between elastic and rigid requests.
    plan = (
        make_cluster().nodes(2).at(0)
        .quota("ml", "a100", 16).quota("cv", "a100", 4)
        .running(make_running(make_job("r").team("cv").gpus(4).limit(1000)).on("n1", 0, 1, 2, 3))
        .pending(make_job("j0").team("ml").gpus(8).submitted(0),
                 make_job("a").team("ml").gpus(2).cpus_per_gpu(4).submitted(1),
                 make_job("b").team("ml").gpus(2).cpus_per_gpu(8).submitted(2),
                 make_job("c").team("cv").gpus(2).cpus_per_gpu(4).submitted(3),
                 make_job("d").team("cv").gpus(4).elastic(2, 4).cpus_per_gpu(8).submitted(4),
                 make_job("e").team("cv").gpus(2).cpus_per_gpu(8).submitted(5))
        .plan(SchedulerConfig(max_placement_attempts=1))
    )
    assert [b.job_id for b in plan.binds] == ["j0"]
    by_id = {p.job_id: p for p in plan.pending}
    for job_id in ("a", "b"):
        assert by_id[job_id].code is ReasonCode.BEHIND_HIGHER_PRIORITY
        assert "Not tried this cycle" in by_id[job_id].message
    for job_id in ("c", "d", "e"):
        assert by_id[job_id].code is ReasonCode.QUOTA_EXCEEDED
        assert "team cv uses 4 of 4 nominal a100" in by_id[job_id].message
    # r frees cv's 4 GPUs at t=1000: c and d (2 each) take them; e waits until they have run
    # (no runtime limit: the default estimate of 4 h)
    assert by_id["c"].eta == by_id["d"].eta == 1000.0
    assert by_id["e"].eta == 1000.0 + 14400.0
    assert "its team's quota goes first to the 4 a100 GPUs of its jobs ahead of it" \
        in by_id["e"].message
    # a job not tried this cycle still says how its estimate was made
    assert by_id["b"].eta is not None and "Estimated start" in by_id["b"].message
    assert "(elastic 2..4 GPUs)" in by_id["d"].message
    assert "elastic" not in by_id["c"].message and "elastic" not in by_id["e"].message
    positions = [p.queue_position for p in plan.pending]
    assert len(set(positions)) == 5 and positions == sorted(positions)


def test_pending_counts_by_reason_in_fleet_figures():
    plan = (
        make_cluster().nodes(1)
        .pending(make_job("a").gpus(2).types("h100"), make_job("b").gpus(0))
        .plan()
    )
    assert plan.fleet.pending_by_reason == {"CanNeverRun": 1, "InvalidRequest": 1}


def test_eta_counts_the_jobs_ahead_on_the_same_gpus():
    # One node busy until t=3600; three 8-GPU jobs of one hour each wait for it. The first
    # holds the reservation at 3600; the others start once the jobs ahead have run, back to
    # back: 7200 and 10800, not all at 3600.
    plan = (
        make_cluster().nodes(1).at(0)
        .running(make_running(make_job("r").gpus(8).limit(3600)).whole("n0"))
        .pending(*(make_job(f"j{i}").gpus(8).limit(3600).submitted(i) for i in range(3)))
        .plan()
    )
    assert why(plan, "j0").code is ReasonCode.WAITING_FOR_RESERVATION
    assert why(plan, "j0").eta == 3600.0
    assert why(plan, "j1").eta == 7200.0
    assert why(plan, "j2").eta == 10800.0
    assert "first run the jobs ahead of it" in why(plan, "j2").message


def test_eta_ignores_jobs_ahead_on_other_gpus():
    # The h100 job ahead does not delay the a100 job: its ETA is the a100 release time.
    plan = (
        make_cluster().nodes(1).nodes(1, gpu_type="h100", prefix="h").at(0)
        .running(make_running(make_job("r").gpus(8).limit(3600)).whole("n0"),
                 make_running(make_job("s").gpus(8).types("h100").limit(3600)).whole("h0"))
        .pending(make_job("h1").gpus(8).types("h100").limit(7200).submitted(0),
                 make_job("h2").gpus(8).types("h100").limit(7200).submitted(1),
                 make_job("a").gpus(8).types("a100").limit(3600).submitted(2))
        .plan(SchedulerConfig(backfill=False))
    )
    assert why(plan, "h1").eta == 3600.0
    assert why(plan, "h2").eta == 3600.0 + 7200.0
    assert why(plan, "a").eta == 3600.0


def test_eta_of_a_job_behind_many_grows_with_its_position():
    # Past the placement budget every job shares one outcome, but not one ETA.
    plan = (
        make_cluster().nodes(2).at(0)
        .running(make_running(make_job("r").gpus(8).limit(1800)).whole("n0"),
                 make_running(make_job("q").gpus(8).limit(1800)).whole("n1"))
        .pending(*(make_job(f"j{i}").gpus(4).limit(3600).submitted(i) for i in range(8)))
        .plan(SchedulerConfig(max_placement_attempts=1))
    )
    etas = [why(plan, f"j{i}").eta for i in range(8)]
    assert all(e is not None for e in etas)
    assert etas == sorted(etas) and etas[-1] > etas[0]
    # 16 GPUs from t=1800; seven jobs of 4 GPUs x 1 h ahead of the last: 1800 + 7*4*3600/16
    assert etas[-1] == 1800.0 + 7 * 4 * 3600 / 16


def borrowing_team(*, limit: int | None, lender_nominal: int, lender_uses: int, ml_jobs: tuple[int, ...]):
    """Team ml (nominal 8) in cohort c with team lend; ml runs jobs of the given sizes (limits
    1000, 2000, …), lend runs ``lender_uses`` GPUs of its own; 8-GPU nodes, enough of them free."""
    cluster = (make_cluster().nodes(8).at(0)
               .quota("ml", "a100", 8, borrowing_limit=limit, cohort="c")
               .quota("lend", "a100", lender_nominal, cohort="c"))
    node = 0
    for k, gpus in enumerate(ml_jobs):
        cluster.running(make_running(make_job(f"m{k}").team("ml").gpus(gpus).limit(1000 * (k + 1)))
                        .on(f"n{node}", *range(gpus)))
        node += 1
    if lender_uses:
        cluster.running(make_running(make_job("l").team("lend").gpus(lender_uses).limit(9000))
                        .on(f"n{node}", *range(lender_uses)))
    return cluster


@pytest.mark.parametrize(
    ("limit", "lender_nominal", "lender_uses", "ml_jobs", "asks", "remedy", "eta"),
    [
        # ml holds 12 of 8 nominal (4 borrowed, limit 8): 16 fit, so freeing 4 lets 8 more in;
        # the cohort cannot lend past the limit
        (8, 16, 0, (4, 8), 8, "team ml frees 4 a100 GPUs", 1000.0),
        # no limit, and the lender already lends all it has (4): 12 + 8 must come down to 8 + 4
        (None, 4, 0, (4, 8), 8, "team ml frees 8 a100 GPUs", 2000.0),
        # the lender uses 8 of its 16 and lends 8: ml (12, asks 8) frees 4, or the lender lends
        # 4 of the 8 it uses
        (None, 16, 8, (4, 8), 8, "team ml frees 4 a100 GPUs or its cohort lends 4 more", 1000.0),
        # ml holds 2; the lender uses 4 of its 8 and lends 4: 16 more need 6, more than ml holds
        # and than the lender could add, so both: ml's job ends at t=1000, the lender's at
        # t=9000 (before, no ETA: only ml's own jobs were asked)
        (None, 8, 4, (2,), 16, "team ml frees 2 a100 GPUs and its cohort lends 4 more", 9000.0),
        # ml holds 2 and asks 14: 4 short, which only the lender can give, at t=9000
        (None, 8, 4, (2,), 14, "its cohort lends 4 more a100 GPUs", 9000.0),
    ],
    ids=["at-the-borrowing-limit", "cohort-lends-all-it-has", "either", "both", "cohort-only"],
)
def test_quota_remedy_counts_the_borrowing_room_freed_gpus_give_back(
        limit, lender_nominal, lender_uses, ml_jobs, asks, remedy, eta):
    cluster = borrowing_team(limit=limit, lender_nominal=lender_nominal, lender_uses=lender_uses,
                             ml_jobs=ml_jobs)
    plan = cluster.pending(make_job("j").team("ml").gpus(asks).per_node(2)).plan(
        SchedulerConfig(backfill=False))
    explanation = why(plan, "j")
    assert explanation.code is ReasonCode.QUOTA_EXCEEDED
    assert explanation.would_start_if == remedy
    assert explanation.eta == eta


def test_quota_reservation_waits_for_what_the_quota_lacks_not_for_the_borrowing_room_too():
    # ml holds 12 of 8 nominal with a borrowing limit of 8: it lacks 4 for 8 more, which its
    # first job frees at t=1000 (the formula that ignored the room it gets back said 8, t=2000)
    cluster = borrowing_team(limit=8, lender_nominal=16, lender_uses=0, ml_jobs=(4, 8))
    plan = cluster.pending(make_job("j").team("ml").gpus(8)).plan()
    explanation = why(plan, "j")
    assert explanation.code is ReasonCode.WAITING_FOR_RESERVATION
    assert "released the 4 a100 GPUs its quota lacks now" in explanation.message
    assert explanation.eta == 1000.0
