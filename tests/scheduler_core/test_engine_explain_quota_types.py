"""A job over its quota on every GPU type it accepts is told so type by type (each type's use,
nominal quota and what it may borrow), its remedy is the cheapest way across types (the type
whose quota lacks the fewest GPUs), and its ETA is the earliest start over those types
(quota and GPUs both there). Before, the sentence and the remedy named the first type alone,
and the ETA was that type's."""

from __future__ import annotations

import pytest
from engine_builders import make_cluster, make_job, make_running, why
from test_engine_explain_eta import evolve

from scheduler_core import NodeState, ReasonCode, SchedulerConfig

NO_BACKFILL = SchedulerConfig(backfill=False)


def over_quota_on_both_types(a100_ends: float = 1000.0, h100_ends: float | None = 5000.0):
    """Team ml: a100 quota 8, all 8 held by a (until ``a100_ends``); h100 quota 8, 4 held by
    h (until ``h100_ends``; ``None``: h declares no runtime limit). j asks for 8 GPUs of a100 or h100: the h100 quota lacks 4, the
    a100 quota 8."""
    return (
        make_cluster().nodes(1, prefix="a").nodes(1, gpu_type="h100", prefix="h").at(0)
        .quota("ml", "a100", 8).quota("ml", "h100", 8)
        .running(make_running(make_job("a").gpus(8).types("a100").limit(a100_ends)).whole("a0"),
                 make_running(make_job("h").gpus(4).types("h100").limit(h100_ends))
                 .on("h0", 0, 1, 2, 3))
        .pending(make_job("j").gpus(8).types("a100", "h100").limit(3600))
    )


def test_a_job_over_quota_on_both_types_it_accepts_names_each_with_its_numbers():
    j = why(over_quota_on_both_types().plan(NO_BACKFILL), "j")
    assert j.code is ReasonCode.QUOTA_EXCEEDED
    assert j.message.startswith(
        "Over quota on both GPU types it accepts: team ml uses 8 of 8 nominal a100 GPUs and can "
        "borrow 0 more (no cohort to borrow from), and 4 of 8 nominal h100 GPUs and can borrow 0 more (no cohort "
        "to borrow from); this job needs 8.")


def over_quota_beside_a_protected_h100_job():
    """Team ml: a100 quota 8, all held by a (high priority, until t=9000); h100 quota 10, 8
    held by v (low priority, started at t=600, protected for its first hour). At t=1000 j
    (high, 8 GPUs of a100 or h100) lacks 8 of a100 and 6 of h100, and may preempt v at t=4200,
    stopped by t=4230."""
    return (
        make_cluster().nodes(1, prefix="a").nodes(1, gpu_type="h100", prefix="h").at(1000)
        .quota("ml", "a100", 8).quota("ml", "h100", 10)
        .priority("low", 10, grace_period_s=30, min_runtime_s=3600)
        .running(make_running(make_job("a").priority("high").gpus(8).types("a100").limit(9000))
                 .whole("a0").started(0),
                 make_running(make_job("v").priority("low").gpus(8).types("h100").limit(20000))
                 .whole("h0").started(600))
        .pending(make_job("j").priority("high").gpus(8).types("a100", "h100").limit(3600))
    )


# fleet -> its ETA, the GPU type its sentence says it would start on first (None: it names
# none; its remedy's type is where it starts), its would-start-if, and when it started as the
# runtime limits said
ONE_STORY = {
    "a100-frees-first-h100-lacks-fewer": (
        lambda: over_quota_on_both_types(a100_ends=1000.0, h100_ends=5000.0),
        (1000.0, "a100", "team ml frees 8 a100 GPUs, or team ml frees 4 h100 GPUs", 1000.0)),
    "h100-lacks-fewer-and-frees-first": (
        lambda: over_quota_on_both_types(a100_ends=9000.0, h100_ends=2000.0),
        (2000.0, None, "team ml frees 4 h100 GPUs", 2000.0)),
    "a100-frees-first-but-its-node-goes-into-maintenance": (
        lambda: over_quota_on_both_types(a100_ends=1000.0, h100_ends=5000.0)
        .maintenance("w", "a0", start=2000, end=20000),
        (5000.0, None, "team ml frees 4 h100 GPUs", 5000.0)),
    "h100-never-frees-by-runtime-limits": (
        lambda: over_quota_on_both_types(a100_ends=1000.0, h100_ends=None),
        (1000.0, "a100", "team ml frees 8 a100 GPUs, or team ml frees 4 h100 GPUs", 1000.0)),
    "preempting-its-teams-h100-job-first": (
        over_quota_beside_a_protected_h100_job,
        (4230.0, None, "team ml frees 6 h100 GPUs", 4230.0)),
}


@pytest.mark.parametrize("case", sorted(ONE_STORY))
def test_a_job_over_quota_on_several_types_tells_one_story_of_where_when_and_what_starts_it(case):
    # Its sentence, ETA and would-start-if name the same type: the one it starts on first,
    # whose remedy leads, then the cheapest way when that is another type's. Before, its
    # sentence said "It would start first on its a100 GPUs." while its would-start-if named
    # the h100 quota alone; a maintenance window on the earliest type's node moved its ETA to
    # t=20000 on a100, though it started on h100 at t=5000; and a job that would preempt its
    # team's h100 job first was told it would start first on its a100 GPUs.
    build, (eta, first_on, would, started) = ONE_STORY[case]
    first, starts = evolve(build().snapshot(), NO_BACKFILL, also_at=(4200.0,))
    j = why(first, "j")
    assert j.code is ReasonCode.QUOTA_EXCEEDED
    assert (j.eta, j.would_start_if) == (eta, would)
    assert starts == {"j": started}
    if first_on is None:
        assert "It would start first" not in j.message
    else:
        assert f"It would start first on its {first_on} GPUs. Estimated start t={eta:.0f}" in j.message
    assert f"t={eta:.0f}" in j.message


def test_a_job_of_any_type_over_quota_on_each_lists_every_type():
    plan = (
        make_cluster().nodes(1, prefix="a").nodes(1, gpu_type="h100", prefix="h")
        .nodes(1, gpu_type="t4", prefix="t").at(0)
        .quota("ml", "a100", 4).quota("ml", "h100", 2).quota("ml", "t4", 1)
        .pending(make_job("j").gpus(8).limit(3600))
        .plan(NO_BACKFILL)
    )
    j = why(plan, "j")
    # no quota can ever hold 8: it can never run, and every type says why
    assert j.code is ReasonCode.CAN_NEVER_RUN
    assert j.message == (
        "Can never run under its quota: team ml may hold at most 1 t4 GPU (1 nominal, none to "
        "borrow), at most 4 a100 GPUs (4 nominal, none to borrow) or at most 2 h100 GPUs (2 "
        "nominal, none to borrow); this job needs 8.")


def test_a_job_beyond_its_borrowing_limit_is_told_the_ceiling_not_todays_room():
    # ml's cohort could lend 64, but ml may borrow 48 at most: 88 can never fit. Before, the
    # sentence gave today's use and room ("can borrow 0 more" once others borrowed it).
    plan = (
        make_cluster().nodes(16, gpu_type="h100").at(0)
        .quota("ml", "h100", 32, borrowing_limit=48, cohort="all").quota("cv", "h100", 64, cohort="all")
        .pending(make_job("big").gpus(88).types("h100").limit(3600))
        .plan(NO_BACKFILL)
    )
    big = why(plan, "big")
    assert big.code is ReasonCode.CAN_NEVER_RUN
    assert big.message == ("Can never run under its quota: team ml may hold at most 80 h100 GPUs (32 nominal "
                           "and 48 borrowed at most); this job needs 88.")


def test_a_job_over_quota_on_one_type_and_never_on_the_other_is_told_the_reachable_remedy():
    # no h100 quota at all for ml (nominal 0, no cohort): the remedy is on a100
    plan = (
        make_cluster().nodes(1, prefix="a").nodes(1, gpu_type="h100", prefix="h").at(0)
        .quota("ml", "a100", 8).quota("cv", "h100", 8)
        .running(make_running(make_job("a").gpus(8).types("a100").limit(1000)).whole("a0"))
        .pending(make_job("j").gpus(8).types("h100", "a100").limit(3600))
        .plan(NO_BACKFILL)
    )
    j = why(plan, "j")
    assert j.code is ReasonCode.QUOTA_EXCEEDED
    assert "0 of 0 nominal h100 GPUs and can borrow 0 more (no cohort to borrow from), and 8 of 8 nominal a100" in j.message
    assert j.would_start_if == "team ml frees 8 a100 GPUs"
    assert j.eta == 1000.0


def test_an_elastic_job_over_quota_is_described_at_the_size_it_can_start_with():
    # quota 8, 4 held: 8..16 GPUs need 4 freed for the 8 it can start with (before: "needs
    # 16" and "frees 12", while its ETA counted 8)
    plan = (
        make_cluster().nodes(2).at(0).quota("ml", "a100", 8)
        .running(make_running(make_job("r").gpus(4).limit(1000)).on("n0", 0, 1, 2, 3))
        .pending(make_job("e").elastic(8, 16).per_node(8).limit(3600))
        .plan(NO_BACKFILL)
    )
    e = why(plan, "e")
    assert e.code is ReasonCode.QUOTA_EXCEEDED
    assert e.message.startswith(
        "Over quota: team ml uses 4 of 8 nominal a100 GPUs and can borrow 0 more (no cohort to borrow from); this job "
        "needs 8 (elastic 8..16 GPUs).")
    assert e.would_start_if == "team ml frees 4 a100 GPUs"
    assert e.eta == 1000.0


def test_a_job_on_nodes_not_ready_and_over_quota_on_both_types_names_each():
    plan = (
        make_cluster().nodes(1, prefix="a", state=NodeState.DOWN)
        .nodes(1, gpu_type="h100", prefix="h", state=NodeState.DOWN).at(0)
        .quota("ml", "a100", 8).quota("ml", "h100", 8)
        .running(make_running(make_job("a").gpus(4).types("a100")).on("a0", 0, 1, 2, 3),
                 make_running(make_job("h").gpus(2).types("h100")).on("h0", 0, 1))
        .pending(make_job("j").gpus(7).types("a100", "h100").limit(3600))
        .plan(NO_BACKFILL)
    )
    j = why(plan, "j")
    assert j.code is ReasonCode.NODE_NOT_READY
    assert j.message.endswith(
        "It is also over quota on both GPU types it accepts: team ml uses 4 of 8 nominal a100 "
        "GPUs and can borrow 0 more (no cohort to borrow from), and 2 of 8 nominal h100 GPUs and can borrow 0 more (no cohort to borrow from); this "
        "job needs 7.")
    assert j.would_start_if == "a capable node returns to ready, and team ml frees 1 h100 GPU"


def test_a_quota_of_one_gpu_reads_in_the_singular():
    plan = (
        make_cluster().nodes(1, prefix="a").at(0).quota("ml", "a100", 1)
        .running(make_running(make_job("r").gpus(1).types("a100").limit(3600)).on("a0", 0))
        .pending(make_job("j").gpus(1).types("a100").limit(3600))
        .plan(NO_BACKFILL)
    )
    assert "team ml uses 1 of 1 nominal a100 GPU and can borrow 0 more (no cohort to borrow from); this job needs 1" in why(plan, "j").message


def test_jobs_behind_a_head_over_its_quota_count_the_head_and_each_other():
    # language (32 nominal, may borrow 48: 80 at most) holds 16 until t=7200; the head q1 holds
    # a reservation of 32 from t=7200; q2..q4 (32 each, 1 h) wait behind it. Vision's 64 free at
    # t=5400. Before: q2 and q3 were both promised t=5400, though beside the head and the 16
    # only one of them fits under 80: q3 started at 9000, its ETA passed.
    snap = (make_cluster().nodes(16, gpu_type="h100").at(0)
            .quota("language", "h100", 32, borrowing_limit=48, cohort="all")
            .quota("vision", "h100", 96, cohort="all")
            .running(make_running(make_job("held").team("language").gpus(16).types("h100").limit(7200))
                     .whole("n0", "n1").started(0),
                     make_running(make_job("v1").team("vision").gpus(64).types("h100").limit(5400))
                     .whole(*[f"n{i}" for i in range(2, 10)]).started(0),
                     make_running(make_job("v2").team("vision").gpus(48).types("h100").limit(9000))
                     .whole(*[f"n{i}" for i in range(10, 16)]).started(0))
            .pending(*[make_job(f"q{i}").team("language").gpus(32).types("h100").limit(3600).submitted(i)
                       for i in range(1, 5)])
            .snapshot())
    first, starts = evolve(snap)
    for job in ("q1", "q2", "q3", "q4"):  # no ETA passes (each started by it); they may be late
        assert starts[job] <= why(first, job).eta, (job, why(first, job).eta, starts[job])
    assert (starts["q2"], starts["q3"], starts["q4"]) == (5400.0, 9000.0, 9000.0)
    assert "and the 32 h100 GPUs of its jobs ahead of it in the queue" in why(first, "q3").message
