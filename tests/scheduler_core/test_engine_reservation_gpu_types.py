"""The head job's reservation goes to the GPU type that frees first, of the types it accepts
(seed 000, EASY backfill: "reserve a start for the head job"; the earliest start is the
promise). Its preferred type wins a tie. Before, it took the first type with any reservation:
a serving job accepting H100 or A100 was promised H100 in 4 h while its A100 quota freed in 2 h."""

from __future__ import annotations

from engine_builders import make_cluster, make_job, make_running, why

from scheduler_core import ReasonCode, SchedulerConfig

EASY = SchedulerConfig()


def both_types_busy(h100_ends: float, a100_ends: float):
    """One node of each type, each full with one job ending at its limit; j asks for 8 GPUs of
    h100 (preferred) or a100."""
    return (
        make_cluster().nodes(1, gpu_type="h100", prefix="h").nodes(1, prefix="a").at(0)
        .running(make_running(make_job("h").gpus(8).types("h100").limit(h100_ends)).whole("h0"),
                 make_running(make_job("a").gpus(8).types("a100").limit(a100_ends)).whole("a0"))
        .pending(make_job("j").gpus(8).types("h100", "a100").limit(3600))
    )


def _reserved_node(plan, job_id: str) -> tuple[float, set[str]]:
    [r] = [r for r in plan.reservations if r.job_id == job_id]
    return r.start_at, {p.node for p in r.placements}


def test_head_reservation_goes_to_the_gpu_type_that_frees_first():
    plan = both_types_busy(h100_ends=14400.0, a100_ends=7200.0).plan(EASY)
    assert _reserved_node(plan, "j") == (7200.0, {"a0"})
    j = why(plan, "j")
    assert j.code is ReasonCode.WAITING_FOR_RESERVATION and j.eta == 7200.0


def test_head_reservation_keeps_the_preferred_type_on_a_tie():
    plan = both_types_busy(h100_ends=7200.0, a100_ends=7200.0).plan(EASY)
    assert _reserved_node(plan, "j") == (7200.0, {"h0"})


def test_head_reservation_over_quota_goes_to_the_type_whose_quota_frees_first():
    """Team ml holds its whole quota of both types with its own jobs: h100's back at t=14400,
    a100's at t=7200. The head reserves where its quota and the GPUs are back first."""
    plan = (
        make_cluster().nodes(2, gpu_type="h100", prefix="h").nodes(2, prefix="a").at(0)
        .quota("ml", "h100", 8).quota("ml", "a100", 8)
        .running(make_running(make_job("h").gpus(8).types("h100").limit(14400.0)).whole("h0"),
                 make_running(make_job("a").gpus(8).types("a100").limit(7200.0)).whole("a0"))
        .pending(make_job("j").gpus(8).types("h100", "a100").limit(3600))
        .plan(EASY)
    )
    start, nodes = _reserved_node(plan, "j")
    assert start == 7200.0 and nodes <= {"a0", "a1"}
    j = why(plan, "j")
    assert j.code is ReasonCode.WAITING_FOR_RESERVATION
    assert "a100 GPU" in j.message and j.eta == 7200.0


def test_head_reservation_goes_to_a_type_its_quota_refuses_now_when_that_type_starts_it_first():
    # g takes a100 or h100 (8 GPUs). a100: its quota admits it, n0 busy until t=5000. h100:
    # ml's own xh holds its 8 GPUs of quota until t=1000, when h0 frees too. Until 7 Dec only
    # the types admitted now were weighed: g held n0 from t=5000, was told t=5000, and started
    # at t=1000 on h100, with no GPUs held for it there.
    from test_engine_explain_eta import evolve

    cluster = (
        make_cluster().nodes(1).nodes(2, gpu_type="h100", prefix="h").at(0)
        .quota("ml", "a100", 8).quota("ml", "h100", 8).quota("ops", "a100", 8)
        .running(make_running(make_job("a").team("ops").gpus(8).limit(5000)).whole("n0"),
                 make_running(make_job("xh").team("ml").types("h100").gpus(8).limit(1000)).whole("h0"))
        .pending(make_job("g").team("ml").types("a100", "h100").gpus(8).limit(600))
    )
    first, starts = evolve(cluster.snapshot(), EASY)
    [reservation] = first.reservations
    assert reservation.start_at == 1000.0
    assert {p.node for p in reservation.placements} <= {"h0", "h1"}
    g = why(first, "g")
    assert (g.code, g.eta, starts.get("g")) == (ReasonCode.WAITING_FOR_RESERVATION, 1000.0, 1000.0)
    assert "the 8 h100 GPUs its quota lacks now" in g.message
