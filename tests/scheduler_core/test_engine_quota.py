"""Rule 4, quotas and cohorts: quota per team x GPU type; borrowing from the cohort's unused
quota up to the borrowing limit and the lender's lending limit; borrowed work is marked; an
owner reclaiming its quota preempts borrowers first (seed 004)."""

from __future__ import annotations

import dataclasses

import pytest
from engine_builders import bound, gpu_count, make_cluster, make_job, make_running, why

from scheduler_core import PreemptionReason, ReasonCode
from scheduler_core.quota import QuotaLedger
from scheduler_core.types import QuotaInfo


def ledger(*quotas: QuotaInfo, used: dict[tuple[str, str], int] | None = None) -> QuotaLedger:
    book = QuotaLedger(quotas)
    for (team, gpu_type), n in (used or {}).items():
        book.charge(team, gpu_type, n)
    return book


@pytest.mark.parametrize(
    ("quotas", "used", "request_gpus", "admitted", "borrowed"),
    [
        ((QuotaInfo("ml", "a100", 8),), {}, 8, True, False),
        ((QuotaInfo("ml", "a100", 8),), {("ml", "a100"): 4}, 8, False, False),
        ((QuotaInfo("ml", "a100", 8, cohort="c"), QuotaInfo("cv", "a100", 16, cohort="c")),
         {}, 16, True, True),
        ((QuotaInfo("ml", "a100", 8, cohort="c"), QuotaInfo("cv", "a100", 16, cohort="c")),
         {("cv", "a100"): 12}, 16, False, False),
        ((QuotaInfo("ml", "a100", 8, borrowing_limit=4, cohort="c"),
          QuotaInfo("cv", "a100", 16, cohort="c")), {}, 12, True, True),
        ((QuotaInfo("ml", "a100", 8, borrowing_limit=4, cohort="c"),
          QuotaInfo("cv", "a100", 16, cohort="c")), {}, 13, False, False),
        ((QuotaInfo("ml", "a100", 8, cohort="c"),
          QuotaInfo("cv", "a100", 16, lending_limit=2, cohort="c")), {}, 10, True, True),
        ((QuotaInfo("ml", "a100", 8, cohort="c"),
          QuotaInfo("cv", "a100", 16, lending_limit=2, cohort="c")), {}, 11, False, False),
        ((QuotaInfo("ml", "a100", 8, cohort="c"), QuotaInfo("cv", "a100", 16, cohort="c"),
          QuotaInfo("nlp", "a100", 0, cohort="c")), {("nlp", "a100"): 10}, 16, False, False),
        ((QuotaInfo("cv", "a100", 16),), {}, 1, False, False),
        ((QuotaInfo("ml", "h100", 8),), {}, 64, True, False),
    ],
    ids=[
        "within-nominal",
        "over-nominal-without-cohort",
        "borrows-cohort-unused-quota",
        "lender-uses-its-own-quota-nothing-to-borrow",
        "within-borrowing-limit",
        "beyond-borrowing-limit",
        "within-lenders-lending-limit",
        "beyond-lenders-lending-limit",
        "another-borrower-already-holds-the-lendable-gpus",
        "team-without-a-quota-for-a-governed-type",
        "ungoverned-gpu-type-is-not-limited",
    ],
)
def test_quota_per_team_and_gpu_type_with_cohort_borrowing(quotas, used, request_gpus,
                                                            admitted, borrowed):
    verdict = ledger(*quotas, used=used).check("ml", "a100", request_gpus)
    assert (verdict.admitted, verdict.borrowed) == (admitted, borrowed)


def test_refusal_says_used_nominal_and_borrowable():
    verdict = ledger(
        QuotaInfo("ml", "a100", 8, borrowing_limit=4, cohort="c"),
        QuotaInfo("cv", "a100", 16, cohort="c"),
        used={("ml", "a100"): 10},
    ).check("ml", "a100", 4)
    assert not verdict.admitted
    assert verdict.describe("ml", "a100", 4) == (
        "team ml uses 10 of 8 nominal a100 GPUs and can borrow 2 more; this job needs 4"
    )


def test_borrowed_bind_is_marked_borrowed_and_nominal_bind_is_not():
    plan = (
        make_cluster().nodes(4)
        .quota("ml", "a100", 8, cohort="c").quota("cv", "a100", 24, cohort="c")
        .pending(make_job("mine").team("ml").gpus(8).submitted(0),
                 make_job("lent").team("ml").gpus(8).submitted(1))
        .plan()
    )
    flags = {b.job_id: b.borrowed for b in plan.binds}
    assert flags == {"mine": False, "lent": True}
    assert plan.fleet.borrowed_gpus == 8


def test_over_quota_job_waits_with_numbers_while_capacity_is_free():
    plan = (
        make_cluster().nodes(4)
        .quota("ml", "a100", 8)
        .running(make_running(make_job("r").team("ml").gpus(8)).whole("n0"))
        .pending(make_job("j").team("ml").gpus(4))
        .plan()
    )
    explanation = why(plan, "j")
    assert explanation.code is ReasonCode.QUOTA_EXCEEDED
    assert explanation.reason == "QuotaExceeded"
    assert "uses 8 of 8 nominal a100 GPUs and can borrow 0 more (no cohort to borrow from); this job needs 4" in \
        explanation.message
    assert explanation.resolvable


def test_quota_never_exceeded_by_a_batch_of_binds():
    jobs = [make_job(f"j{i}").team("ml").gpus(4).submitted(i) for i in range(6)]
    plan = make_cluster().nodes(4).quota("ml", "a100", 12).pending(*jobs).plan()
    assert sum(gpu_count(p) for p in bound(plan).values()) == 12


def seed_004_cluster(batch_priority: str = "best-effort"):
    """64 GPUs; Serving (nominal 32) uses 16; Batch (nominal 8) sweeps 40 GPUs, 32 of them
    borrowed; 8 GPUs free."""
    cluster = (
        make_cluster().nodes(8)
        .priority("production", 1000).priority("best-effort", 10)
        .quota("serving", "a100", 32, cohort="shared-64gpu")
        .quota("batch", "a100", 8, cohort="shared-64gpu")
        .quota("research", "a100", 24, cohort="shared-64gpu")
        .running(
            make_running(make_job("s1").team("serving").priority("production").serving()
                         .gpus(8)).whole("n0"),
            make_running(make_job("s2").team("serving").priority("production").serving()
                         .gpus(8)).whole("n1"),
        )
        .at(10_000)
    )
    sweep = []
    for k in range(10):
        node = f"n{2 + k // 2}"
        gpus = (0, 1, 2, 3) if k % 2 == 0 else (4, 5, 6, 7)
        sweep.append(
            make_running(make_job(f"eval{k}").team("batch").priority(batch_priority).gpus(4))
            .on(node, *gpus).started(1_000).checkpointed(9_000 - 100 * k).borrowed(k >= 2)
        )
    return cluster.running(*sweep)


@pytest.mark.parametrize("batch_priority", ["best-effort", "production"],
                         ids=["seed-004-best-effort-sweep", "reclaim-ignores-priority"])
def test_seed_004_serving_needs_16_sees_8_free_reclaims_8_from_batch_borrowed_sweep(
        batch_priority):
    plan = (
        seed_004_cluster(batch_priority)
        .pending(make_job("incident").team("serving").priority("production").serving()
                 .gpus(16).per_node(8))
        .plan()
    )
    victims = {p.job_id: p for p in plan.preemptions}
    assert victims, "the owner must reclaim"
    assert all(p.reason is PreemptionReason.RECLAIM_BORROWED for p in victims.values())
    assert all(p.for_job == "incident" for p in victims.values())
    assert not {"eval0", "eval1"} & victims.keys(), "Batch's nominal work is not reclaimed"
    assert len(victims) * 4 == 8, "exactly the missing 8 GPUs are reclaimed"
    assert "incident" not in bound(plan)
    explanation = why(plan, "incident")
    assert explanation.code is ReasonCode.WAITING_FOR_PREEMPTION
    [reservation] = [r for r in plan.reservations if r.job_id == "incident"]
    assert gpu_count(reservation.placements) == 16
    assert "n7" in {p.node for p in reservation.placements}


def test_borrower_beyond_nominal_cannot_reclaim():
    plan = (
        seed_004_cluster()
        .pending(make_job("greedy").team("serving").priority("best-effort").gpus(24)
                 .per_node(8))
        .plan()
    )
    # 16 used + 24 > nominal 32: not a reclaim, and equal-or-lower priority preempts nothing
    assert plan.preemptions == ()


def lowered_quota_cluster(vision: int = 8, serving: int = 16):
    """Vision ran 16 GPUs in a cohort when its quota was 16; an admin has lowered it to 8 and
    raised serving's to 16. Serving runs nothing; the fleet (16 GPUs) is full."""
    return (
        make_cluster().nodes(2)
        .priority("production", 1000).priority("research", 10)
        .quota("vision", "a100", vision, cohort="shared")
        .quota("serving", "a100", serving, cohort="shared")
        .running(
            make_running(make_job("older").team("vision").priority("research").gpus(8)).whole("n0")
            .started(1_000),
            make_running(make_job("newer").team("vision").priority("research").gpus(8)).whole("n1")
            .started(2_000),
        )
        .at(10_000)
    )


def test_a_team_over_a_lowered_quota_borrows_the_excess_and_its_owner_reclaims_it():
    """Found by QA: after a quota was lowered, the team's jobs still counted as within quota
    (their borrowed mark was set at bind), so the owner of the capacity waited hours for their
    runtime limits instead of reclaiming it."""
    plan = lowered_quota_cluster().pending(
        make_job("incident").team("serving").priority("research").gpus(8)).plan()

    [victim] = plan.preemptions
    assert victim.reason is PreemptionReason.RECLAIM_BORROWED and victim.for_job == "incident"
    assert victim.job_id == "newer", "the excess is the work started last"
    assert plan.fleet.borrowed_gpus == 8


def test_the_plan_says_which_running_jobs_now_count_as_borrowed_under_a_lowered_quota():
    """Found by QA: the engine reclaimed vision's newest job as borrowed after its quota was
    lowered, but nothing told the control plane, so the job (and the API, the job page,
    `qm status`) still said it ran within quota. The plan names each job it now counts
    otherwise than its snapshot, with why, for the loop to store."""
    plan = lowered_quota_cluster(vision=8).plan()

    [change] = plan.borrowing
    assert (change.job_id, change.borrowed) == ("newer", True)
    assert change.message == "team vision holds 16 a100 GPUs, 8 above its nominal quota of 8"

    zero = lowered_quota_cluster(vision=0).plan()
    assert [(c.job_id, c.borrowed) for c in zero.borrowing] == [("newer", True), ("older", True)]


def test_a_borrowed_mark_stays_when_its_teams_quota_is_raised():
    """A job marked borrowed stays so (cycle._borrowing_beyond_a_lowered_quota): with vision's
    quota raised back to 16, its job marked borrowed is still what a lender reclaims first.
    Counting borrowing from each cycle's use instead (Kueue's way) was tried on 7 Dec and
    raised the work lost to preemption on the four mixed weeks without checkpoints by 32 % to
    88 % (docs/engine.md, *Preemption on a mixed week*)."""
    cluster = lowered_quota_cluster(vision=16, serving=8)
    cluster._running = [dataclasses.replace(r, borrowed=r.spec.id == "newer") for r in cluster._running]
    plan = cluster.pending(make_job("incident").team("serving").priority("research").gpus(8)).plan()

    assert plan.borrowing == ()
    [victim] = plan.preemptions
    assert (victim.job_id, victim.reason) == ("newer", PreemptionReason.RECLAIM_BORROWED)


def test_a_lowered_quota_marks_its_borrowers_once_not_back_and_forth():
    """Vision's quota lowered from 8 to 2 while it holds 9 GPUs, 2 of them on jobs borrowed at
    bind: the cycle marks its jobs started last until they cover the 5 above (1, 1, 1, then a
    4-GPU job: a job is borrowed whole, so 2 GPUs more than the excess), and the next cycle,
    with those marks stored, marks nothing more and clears nothing: each job is told once."""
    started = {"big": 1_000, "a": 2_000, "b": 3_000, "c": 4_000, "d": 5_000, "e": 6_000}
    slots = {"big": ("n0", (0, 1, 2, 3)), "a": ("n0", (4,)), "b": ("n0", (5,)), "c": ("n0", (6,)),
             "d": ("n0", (7,)), "e": ("n1", (0,))}

    def cluster(borrowed: set[str]):
        return (
            make_cluster().nodes(2)
            .quota("vision", "a100", 2, cohort="shared").quota("serving", "a100", 14, cohort="shared")
            .running(*(make_running(make_job(name).team("vision").gpus(len(gpus))).on(node, *gpus)
                       .started(started[name]).borrowed(name in borrowed)
                       for name, (node, gpus) in slots.items()))
            .at(10_000)
        )

    plan = cluster({"d", "e"}).plan()

    assert sorted((c.job_id, c.borrowed) for c in plan.borrowing) == [
        ("a", True), ("b", True), ("big", True), ("c", True)]
    assert cluster({"a", "b", "big", "c", "d", "e"}).plan().borrowing == ()


def test_a_borrowed_job_still_beyond_the_nominal_stays_borrowed_and_unreported():
    cluster = lowered_quota_cluster(vision=8)
    cluster._running = [dataclasses.replace(r, borrowed=r.spec.id == "newer") for r in cluster._running]
    plan = cluster.plan()
    assert plan.borrowing == () and plan.fleet.borrowed_gpus == 8


def moved_team_cluster(vision_cohort: str | None, *, vision: int = 8, solo_lender: int = 0):
    """Vision borrowed 8 from cohort shared (16 GPUs held, nominal 8); an admin then moved it to
    ``vision_cohort`` (None: no cohort). Serving, still in shared and within its nominal,
    asks for 8 on a full fleet. ``solo_lender``: a team of vision's new cohort with that much
    unused quota to lend it."""
    cluster = lowered_quota_cluster(vision=vision, serving=8)
    cluster._quotas = [q for q in cluster._quotas if q.team != "vision"]
    cluster.quota("vision", "a100", vision, cohort=vision_cohort)
    if solo_lender:
        cluster.quota("speech", "a100", solo_lender, cohort=vision_cohort)
    return cluster.pending(make_job("incident").team("serving").priority("research").gpus(8))


@pytest.mark.parametrize("cohort", ["solo", None], ids=["moved-to-another-cohort", "moved-out-of-any-cohort"])
def test_reclaim_crosses_cohorts_from_a_team_that_borrowed_and_moved(cohort):
    """Found by QA: a team moved out of the cohort it borrowed from kept the borrowed GPUs out
    of its lenders' reach (reclaim worked within a cohort), so serving, within its nominal,
    waited for vision's runtime limits. What a side holds above its nominal beyond what it
    lends itself is guaranteed to someone else: the owner reclaims it wherever it went."""
    plan = moved_team_cluster(cohort).plan()

    [victim] = plan.preemptions
    assert victim.reason is PreemptionReason.RECLAIM_BORROWED and victim.for_job == "incident"
    assert victim.job_id == "newer", "the excess is the work started last"


def test_reclaim_does_not_cross_into_a_cohort_that_lends_its_own_borrowers():
    """Vision borrows 8 in its new cohort from speech, which lends 8 unused: that cohort holds
    nothing beyond its own nominal, and serving may not reclaim across cohorts (the fleet's
    nominal quotas, 32, exceed its 16 GPUs: serving's wait is the oversubscription's)."""
    plan = moved_team_cluster("solo", solo_lender=8).plan()

    assert plan.preemptions == ()
    assert why(plan, "incident").code is not ReasonCode.WAITING_FOR_PREEMPTION


def test_reclaim_from_a_team_whose_quota_was_deleted_under_its_running_work():
    """Vision's quota on a100 was deleted while it ran 16 GPUs: before, a team with no quota
    was never a reclaim victim (its jobs were not even marked borrowed), so serving, within its
    nominal, waited for vision's runtime limits. All it holds is now someone else's guarantee."""
    cluster = lowered_quota_cluster(serving=8)
    cluster._quotas = [q for q in cluster._quotas if q.team != "vision"]
    plan = cluster.pending(make_job("incident").team("serving").priority("research").gpus(8)).plan()

    [victim] = plan.preemptions
    assert victim.reason is PreemptionReason.RECLAIM_BORROWED and victim.job_id == "newer"
    assert plan.fleet.borrowed_gpus == 16


def test_overdrawn_is_a_side_holding_more_above_nominal_than_it_lends():
    ledger = QuotaLedger([QuotaInfo("a", "h100", 8, cohort="c"), QuotaInfo("b", "h100", 8, cohort="c"),
                          QuotaInfo("x", "h100", 8)])
    ledger.charge("a", "h100", 12)  # borrows 4 of b's 8 unused
    assert not ledger.overdrawn("a", "h100") and not ledger.overdrawn("b", "h100")
    ledger.charge("b", "h100", 6)  # b now lends only 2: the cohort holds 2 beyond its own quota
    assert ledger.overdrawn("a", "h100") and ledger.overdrawn("b", "h100")
    ledger.charge("x", "h100", 8)
    assert not ledger.overdrawn("x", "h100")
    ledger.charge("x", "h100", 1)
    assert ledger.overdrawn("x", "h100")
    assert not ledger.overdrawn("nobody", "h100")
    ledger.charge("gone", "h100", 8)  # no quota on a governed type: all it holds is borrowed
    assert ledger.overdrawn("gone", "h100") and not ledger.overdrawn("gone", "t4")


def test_a_team_within_its_quota_lends_nothing_to_reclaim():
    plan = (
        lowered_quota_cluster(vision=16, serving=8)
        .pending(make_job("incident").team("serving").priority("research").gpus(8))
        .plan()
    )
    assert plan.preemptions == () and plan.fleet.borrowed_gpus == 0


def test_over_quota_job_says_whether_its_borrowing_limit_or_its_cohort_stops_it():
    # ml (nominal 8, may borrow 4) holds 12 of a cohort whose other team lends 8: its limit
    # is used. With a limit of 16 the cohort has 4 more to lend: 4 fit, not 8
    def plan(limit: int):
        return (make_cluster().nodes(4).at(0)
                .quota("ml", "a100", 8, cohort="c", borrowing_limit=limit).quota("lend", "a100", 8, cohort="c")
                .running(make_running(make_job("r").team("ml").gpus(12).per_node(4)).on("n0", *range(8))
                         .on("n1", 0, 1, 2, 3))
                .pending(make_job("j").team("ml").gpus(8))
                .plan())
    limited = why(plan(4), "j")
    assert limited.code is ReasonCode.QUOTA_EXCEEDED
    assert ("team ml uses 12 of 8 nominal a100 GPUs and can borrow 0 more (its borrowing limit of 4 is used); "
            "this job needs 8") in limited.message
    roomy = why(plan(16), "j")
    assert "can borrow 4 more; this job needs 8" in roomy.message


def test_a_team_beyond_a_lowered_borrowing_limit_is_told_by_how_much():
    # ml (nominal 8, may borrow 4) holds 20 after its limit was lowered: "its limit is used"
    # read as if it were at the limit, where it is 8 beyond it (found on the demo, 4 Dec: vision
    # "uses 40 of 8 nominal ... (its borrowing limit of 8 is used)")
    plan = (make_cluster().nodes(4).at(0)
            .quota("ml", "a100", 8, cohort="c", borrowing_limit=4).quota("lend", "a100", 16, cohort="c")
            .running(make_running(make_job("r").team("ml").gpus(16).per_node(8)).on("n0", *range(8))
                     .on("n1", *range(8)))
            .running(make_running(make_job("s").team("ml").gpus(4).per_node(4)).on("n2", 0, 1, 2, 3))
            .pending(make_job("j").team("ml").gpus(8))
            .plan())
    told = why(plan, "j")
    assert told.code is ReasonCode.QUOTA_EXCEEDED
    assert ("team ml uses 20 of 8 nominal a100 GPUs and can borrow 0 more (it borrows 12, 8 beyond its "
            "borrowing limit of 4); this job needs 8") in told.message, told.message


def test_a_team_in_no_cohort_is_told_it_has_none_to_borrow_from():
    # It read the bare "can borrow 0 more", beside an admin's page that could show a borrowing
    # limit; in a cohort with nothing to lend, the cohort is named instead.
    def message(cohort: str | None) -> str:
        cluster = make_cluster().nodes(2)
        cluster = cluster.quota("ml", "a100", 8, cohort=cohort) if cohort else cluster.quota("ml", "a100", 8)
        if cohort:
            cluster = cluster.quota("cv", "a100", 8, cohort=cohort).running(
                make_running(make_job("c").team("cv").gpus(8)).whole("n1"))
        plan = (cluster.running(make_running(make_job("r").team("ml").gpus(8)).whole("n0"))
                .pending(make_job("j").team("ml").gpus(4)).plan())
        return why(plan, "j").message

    assert "can borrow 0 more (no cohort to borrow from); this job needs 4" in message(None)
    assert "can borrow 0 more (cohort c has no unused a100 GPUs to lend now)" in message("c")


def test_a_lender_whose_lending_limit_was_lowered_under_its_borrowers_reclaims_them():
    """Serving lent vision 8 A100s (vision: nominal 8, holds 16); an admin then lowered serving's
    lending limit to 0. Vision keeps them (a limit stops nothing) and may borrow no more; they
    come back when serving, within its nominal, asks: it preempts the borrowed work first, as
    the control plane's answer to the change says (services/quotas.lent_beyond_lending_limit)."""
    def cluster():
        return (
            make_cluster().nodes(3)
            .priority("research", 10)
            .quota("vision", "a100", 8, cohort="shared")
            .quota("serving", "a100", 16, cohort="shared", lending_limit=0)
            .running(
                make_running(make_job("own").team("vision").priority("research").gpus(8)).whole("n0").started(1_000),
                dataclasses.replace(make_running(make_job("lent").team("vision").priority("research").gpus(8))
                                    .whole("n1").started(2_000).obj(), borrowed=True),
            )
            .at(10_000)
        )

    more = cluster().pending(make_job("more").team("vision").priority("research").gpus(8)).plan()
    assert bound(more) == {} and why(more, "more").code is ReasonCode.QUOTA_EXCEEDED

    plan = cluster().pending(make_job("incident").team("serving").priority("research").gpus(16)).plan()
    [victim] = plan.preemptions
    assert (victim.job_id, victim.reason, victim.for_job) == ("lent", PreemptionReason.RECLAIM_BORROWED, "incident")
    assert plan.borrowing == (), "vision's borrowed job stays borrowed: it is above vision's nominal"
