"""bench/offline_search.py: the clairvoyant list scheduler and its search, on weeks whose best
schedule is known by hand."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
import types
from pathlib import Path

import pytest

from scheduler_core import schedule as engine_schedule
from scheduler_core.sim import FleetShape, TraceJob, simulate
from scheduler_core.sim.overrides import config_with

REPO = Path(__file__).resolve().parents[3]
M = 60


def _load_bench() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("offline_search_bench", REPO / "bench" / "offline_search.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["offline_search_bench"] = module
    spec.loader.exec_module(module)
    return module


bench = _load_bench()


def _week(jobs: list[TraceJob], *, nodes: int = 2, per: int = 4, horizon_min: int = 120) -> object:
    return bench.Week.of(jobs, horizon_s=horizon_min * M, nodes=nodes, gpus_per_node=per)


def _fifo(week: object) -> list[float]:
    return dict(bench.structured_orders(week))["fifo"]


def _blocked_gang() -> list[TraceJob]:
    """2 nodes × 4 GPUs, 120 min. In submission order a 1-GPU job takes node 0 and a 4-GPU job
    (one whole node, 120 min) takes node 1, so the 2-node gang never finds both nodes empty:
    60 + 480 = 540 GPU-min of 960. Gang first: 480 in the first hour, then the 1-GPU job (60)
    and the first hour of the 4-GPU job (240): 780, the most any schedule gets (the gang needs
    both nodes for an hour, and in the other hour the two others hold at most 5 GPUs)."""
    return [TraceJob("s1", 0, 1, 60 * M, 7200, "u"), TraceJob("gang", 0, 8, 60 * M, 7200, "u"),
            TraceJob("long", 0, 4, 120 * M, 7200, "u")]


def test_submission_order_leaves_the_gang_blocked_and_half_the_fleet_idle() -> None:
    week = _week(_blocked_gang())
    for mode in bench.MODES:
        got = bench.decode(week, _fifo(week), mode, "best-fit")
        assert got.allocated == pytest.approx(540 / 960)
        assert got.starts[1] is None or got.starts[1] >= 60 * M


def test_gang_first_fills_the_nodes_and_work_past_the_horizon_does_not_count() -> None:
    week = _week(_blocked_gang())
    got = bench.decode(week, [1.0, 0.0, 2.0], "greedy", "best-fit")
    assert got.starts == [60 * M, 0, 60 * M]
    assert got.allocated == pytest.approx(780 / 960)  # "long" runs 60-180 min: only 60 min count
    bench.check_schedule(week, got)


def test_search_finds_the_hand_optimum_and_never_passes_it() -> None:
    week = _week(_blocked_gang())
    result = bench.search(week, iterations=50, search_seed=3)
    assert result.best.schedule.allocated == pytest.approx(780 / 960)
    assert result.best.schedule.allocated <= week.upper_bound() + 1e-12
    bench.check_schedule(week, result.best.schedule)


def _packing_case() -> list[TraceJob]:
    """2 nodes × 4 GPUs, 120 min, all submitted at 0 in this order: a (3 GPUs, 60 min) on node
    0, b (3 GPUs, 120 min) on node 1, c (1 GPU, 120 min), then w (a whole node, 60 min).
    Best fit puts c on node 0 (equally full, lowest id) and no node ever empties before the
    horizon; placing c beside b, whose run outlasts it, lets node 0 empty at 60 min for w.
    Then every job's whole work fits in the week: 180 + 360 + 120 + 240 = 900 of 960."""
    return [TraceJob("a", 0, 3, 60 * M, 7200, "u"), TraceJob("b", 0, 3, 120 * M, 7200, "u"),
            TraceJob("c", 0, 1, 120 * M, 7200, "u"), TraceJob("w", 0, 4, 60 * M, 7200, "u")]


def test_end_aligned_packing_keeps_a_node_able_to_empty_where_best_fit_does_not() -> None:
    week = _week(_packing_case())
    best_fit = bench.decode(week, _fifo(week), "greedy", "best-fit")
    aligned = bench.decode(week, _fifo(week), "greedy", "end-aligned")
    assert best_fit.nodes_of[2] == (0,) and best_fit.starts[3] is None
    assert best_fit.allocated == pytest.approx(660 / 960)
    assert aligned.nodes_of[2] == (1,) and aligned.starts[3] == 60 * M
    assert aligned.allocated == pytest.approx(900 / 960)
    assert bench.search(week, iterations=20).best.schedule.allocated == pytest.approx(900 / 960)


def test_easy_mode_does_not_let_a_later_job_delay_the_reserved_gang() -> None:
    # 2 nodes × 4 GPUs: s1 (1 GPU, 30 min) holds node 0, the gang waits for it; a 1-GPU job of
    # 60 min may not take node 1 (it would delay the gang), one of 30 min may.
    jobs = [TraceJob("s1", 0, 1, 30 * M, 7200, "u"), TraceJob("gang", 0, 8, 60 * M, 7200, "u"),
            TraceJob("late_long", 0, 1, 60 * M, 7200, "u"), TraceJob("late_short", 0, 1, 30 * M, 7200, "u")]
    week = _week(jobs)
    easy = bench.decode(week, _fifo(week), "easy", "best-fit")
    assert easy.starts == [0, 30 * M, 90 * M, 0]
    greedy = bench.decode(week, _fifo(week), "greedy", "best-fit")
    assert greedy.starts[2] == 0 and greedy.starts[1] >= 60 * M


def test_check_schedule_refuses_what_the_fleet_cannot_run() -> None:
    week = _week(_blocked_gang())
    good = bench.decode(week, [1.0, 0.0, 2.0], "greedy", "best-fit")
    early = bench.Schedule([-60, 0, 60 * M], list(good.nodes_of), good.busy_gpu_s, good.capacity_gpu_s)
    with pytest.raises(ValueError, match="before its submission"):
        bench.check_schedule(week, early)
    half_gang = bench.Schedule(list(good.starts), [good.nodes_of[0], (0,), good.nodes_of[2]], good.busy_gpu_s,
                               good.capacity_gpu_s)
    with pytest.raises(ValueError, match="distinct node"):
        bench.check_schedule(week, half_gang)
    overlap = bench.Schedule([0, 0, 0], list(good.nodes_of), good.busy_gpu_s, good.capacity_gpu_s)
    with pytest.raises(ValueError, match="holds"):
        bench.check_schedule(week, overlap)


def test_search_is_repeatable_for_a_seed_and_an_iteration_count() -> None:
    rng = random.Random(7)
    jobs = [TraceJob(f"j{i}", rng.randrange(0, 600) * M, rng.choice([1, 2, 4, 8, 16]), rng.randrange(30, 300) * M,
                     36000, "u") for i in range(60)]
    week = _week(jobs, nodes=4, per=8, horizon_min=720)
    first = bench.search(week, iterations=40, search_seed=5)
    again = bench.search(week, iterations=40, search_seed=5)
    assert first.best.schedule.starts == again.best.schedule.starts
    assert first.best.schedule.allocated >= max(row[3] for row in first.structured)
    assert first.best.schedule.allocated <= week.upper_bound() + 1e-12
    bench.check_schedule(week, first.best.schedule)


def test_list_scheduler_matches_the_simulator_where_placement_cannot_differ() -> None:
    # Whole-node jobs only, so which nodes a job gets cannot change what starts later: the
    # engine in submission order without reservations (backfill off) and the list scheduler
    # in greedy mode must start the same jobs at the same times.
    rng = random.Random(11)
    jobs = sorted((TraceJob(f"j{i:03d}", rng.randrange(0, 2000) * M, rng.choice([8, 8, 16, 32]),
                            rng.randrange(60, 540) * M, 36000, "u") for i in range(120)), key=lambda job: job.submit_s)
    horizon_s = 2880 * M
    shape = FleetShape(nodes=8, gpus_per_node=8)
    week = bench.Week.of(jobs, horizon_s=horizon_s, nodes=8, gpus_per_node=8)
    index = {job.job_id: i for i, job in enumerate(jobs)}
    engine_starts: list[float | None] = [None] * len(jobs)

    def recording(snapshot, config):  # type: ignore[no-untyped-def]
        plan = engine_schedule(snapshot, config)
        for bind in plan.binds:
            engine_starts[index[bind.job_id]] = snapshot.now
        return plan

    config = config_with(["backfill=false", "queue_order=fifo", "widest_gang_first=false", "preemption=false"])
    replay = simulate(jobs, shape, config=config, schedule=recording, horizon_s=float(horizon_s))
    ours = bench.decode(week, _fifo(week), "greedy", "best-fit")
    assert ours.starts == engine_starts
    assert ours.allocated == pytest.approx(replay.as_dict()["allocated"], abs=1e-12)
    assert bench.allocated_of(week, engine_starts) == pytest.approx(replay.as_dict()["allocated"], abs=1e-12)


def test_a_decode_resumed_where_the_keys_first_matter_equals_the_full_decode() -> None:
    # submissions on a 30-minute grid, so jobs start at the very instant a moved job arrives
    rng = random.Random(13)
    jobs = [TraceJob(f"j{i}", rng.randrange(0, 30) * 30 * M, rng.choice([1, 2, 4, 8, 16, 32]), rng.randrange(30, 400) * M,
                     36000, "u") for i in range(150)]
    week = _week(jobs, nodes=6, per=8, horizon_min=1200)
    keys = [float(k) for k in range(len(jobs))]
    for mode in bench.MODES:
        for packing in bench.PACKINGS:
            earlier = bench.decode(week, keys, mode, packing)
            for _ in range(20):
                a, b = rng.sample(range(len(jobs)), 2)
                moved = list(keys)
                moved[a], moved[b] = moved[b], moved[a]
                full = bench.decode(week, moved, mode, packing)
                resumed = bench.decode(week, moved, mode, packing, resume=(earlier, min(week.submit[a], week.submit[b])))
                assert (resumed.starts, resumed.nodes_of, resumed.busy_gpu_s) == (full.starts, full.nodes_of, full.busy_gpu_s)


def test_the_command_line_reports_the_best_schedule_and_writes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "week.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,runtime_limit_s,user\n"
                     "a,0,8,3600,7200,u\nb,0,1,7200,10800,u\n", encoding="utf-8")
    out = tmp_path / "best.csv"
    assert bench.main(["--trace", str(trace), "--iterations", "5", "--no-compare", "--json", "--schedule-out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    # 64 nodes: both start at once; b runs 2 h, a 1 h, in a week of 512 GPUs
    assert report["best_allocated"] == pytest.approx((8 * 3600 + 7200) / (7 * 86400 * 512))
    assert report["allocated_upper_bound"] == pytest.approx(report["best_allocated"])
    assert out.read_text(encoding="utf-8").splitlines()[1:] == ["a,0,8,3600,0,0", "b,0,1,7200,0,1"]
