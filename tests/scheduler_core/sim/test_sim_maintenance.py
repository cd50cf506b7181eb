"""Replays with maintenance windows: what a planned window costs, worked out by hand on tiny
fleets; a window file's bad cells name their line and column; a plan that runs into a window
cannot take effect."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_core.sim import (
    FleetShape,
    SimulationError,
    Simulator,
    TraceError,
    TraceJob,
    parse_maintenance,
    simulate,
)
from scheduler_core.types import (
    Bind,
    FleetFigures,
    GpuPlacement,
    MaintenanceWindow,
    Plan,
    SchedulerConfig,
)

HOUR = 3600.0
ONE_NODE = FleetShape(nodes=1, gpus_per_node=8)
REPO = Path(__file__).resolve().parents[3]
#: n0000 out of service from 30 min to 90 min
WINDOW = MaintenanceWindow("fw", ("n0000",), 0.5 * HOUR, 1.5 * HOUR, "firmware")


def job(job_id: str, submit: float, gpus: int, duration: float, limit: float | None) -> TraceJob:
    return TraceJob(job_id, submit, gpus, duration, limit, "u")


def test_maintenance_replay_a_job_whose_limit_runs_into_the_window_waits_until_it_ends() -> None:
    # a's 1 h limit would run into the window: it starts at 90 min; b's 20 min limit fits before it
    result = simulate([job("a", 0, 8, HOUR, HOUR), job("b", 60, 4, 900, 1200)], ONE_NODE,
                      horizon_s=3 * HOUR, maintenance=[WINDOW])
    got = result.as_dict()
    assert got["wait_max_min"] == 90.0                     # a: 0 -> 5400 s
    assert got["wait_small_mean_min"] == 0.0               # b started at once, beside the window
    assert got["jobs_done"] == 2
    assert got["allocated"] == pytest.approx((4 * 900 + 8 * HOUR) / (8 * 3 * HOUR))
    assert got["maintenance_gpu_hours"] == 8.0


def test_maintenance_replay_without_windows_the_same_trace_starts_at_once() -> None:
    got = simulate([job("a", 0, 8, HOUR, HOUR), job("b", 60, 4, 900, 1200)], ONE_NODE,
                   horizon_s=3 * HOUR).as_dict()
    assert got["wait_max_min"] == 59.0                     # b waits behind a (60 s -> 3600 s)
    assert "maintenance_gpu_hours" not in got


def test_maintenance_replay_a_job_without_a_runtime_limit_waits_for_the_window_to_end() -> None:
    got = simulate([job("a", 0, 2, 600, None)], ONE_NODE, horizon_s=3 * HOUR, maintenance=[WINDOW]).as_dict()
    assert got["wait_max_min"] == 90.0


def test_maintenance_replay_idle_gpus_under_maintenance_are_not_stranded() -> None:
    # s holds 4 GPUs of n0000 through the window (started before it, limit ends at 2 h); the
    # whole-node job l waits: n0001 is busy, n0000's idle half is out of service, not stranded
    two = FleetShape(nodes=2, gpus_per_node=8)
    window = MaintenanceWindow("m", ("n0000",), 0.0, 3 * HOUR)
    binds = (Bind("s", (GpuPlacement("n0000", (0, 1, 2, 3)),)), Bind("x", (GpuPlacement("n0001", tuple(range(8))),)))
    trace = [job("s", 0, 4, 2 * HOUR, 2 * HOUR), job("x", 0, 8, 2 * HOUR, 2 * HOUR), job("l", 60, 8, 600, HOUR)]

    def decide(snapshot, config):  # type: ignore[no-untyped-def]
        if snapshot.now > 0:
            sim.maintenance = (window,)   # planned after s started: running jobs are never stopped
        return _plan(binds if snapshot.now == 0 else ())

    sim = Simulator(trace, two, decide, SchedulerConfig(), horizon_s=HOUR)
    assert sim.run().as_dict()["stranded_gpus"] == 0.0
    # the same run with n0000 in service: its idle half is stranded while l waits (60 s on)
    sim = Simulator(trace, two, lambda snapshot, config: _plan(binds if snapshot.now == 0 else ()),
                    SchedulerConfig(), horizon_s=HOUR)
    assert sim.run().as_dict()["stranded_gpus"] == pytest.approx(4 * (HOUR - 60) / HOUR)


def test_maintenance_replay_a_plan_that_runs_into_a_window_cannot_take_effect() -> None:
    binds = (Bind("a", (GpuPlacement("n0000", tuple(range(8))),)),)
    sim = Simulator([job("a", 0, 8, HOUR, HOUR)], ONE_NODE,
                    lambda snapshot, config: _plan(binds if snapshot.now == 0 else ()),
                    SchedulerConfig(), horizon_s=2 * HOUR, maintenance=[WINDOW])
    with pytest.raises(SimulationError, match="placed on n0000, whose maintenance window fw"):
        sim.run()


#: the window of WINDOW, announced 10 min in: an admin created it then
LATE = MaintenanceWindow("fw", ("n0000",), 0.5 * HOUR, 1.5 * HOUR, "firmware", announced_at=600.0)


def test_maintenance_replay_a_window_announced_late_is_not_planned_around_before_it_is_known() -> None:
    # a starts at once (the window is unknown at t=0) and runs into it: as in the product, a
    # running job is not stopped for a window, so a ends at 1 h, holding 8 GPUs for the 30 min
    # inside the window; b, submitted after the announce, waits for the window's end (90 min)
    trace = [job("a", 0, 8, HOUR, HOUR), job("b", 4000, 8, 600, HOUR)]
    got = simulate(trace, ONE_NODE, horizon_s=3 * HOUR, maintenance=[LATE]).as_dict()
    assert got["jobs_done"] == 2
    assert got["wait_max_min"] == pytest.approx((5400 - 4000) / 60)     # b; a waited 0
    assert (got["maintenance_overrun_jobs"], got["maintenance_overrun_gpu_hours"]) == (1, 4.0)
    assert got["maintenance_gpu_hours"] == 8.0
    # known from the start, the same window keeps a off the node until it ends: no overrun
    known = simulate(trace, ONE_NODE, horizon_s=3 * HOUR, maintenance=[WINDOW]).as_dict()
    assert known["wait_max_min"] == 90.0
    assert (known["maintenance_overrun_jobs"], known["maintenance_overrun_gpu_hours"]) == (0, 0.0)


def test_maintenance_replay_the_engine_sees_a_window_from_its_announce_and_is_woken_by_it() -> None:
    seen: list[tuple[float, tuple[str, ...]]] = []

    def decide(snapshot, config):  # type: ignore[no-untyped-def]
        seen.append((snapshot.now, tuple(w.id for w in snapshot.maintenance)))
        return _plan(())

    Simulator([job("a", 0, 8, HOUR, HOUR)], ONE_NODE, decide, SchedulerConfig(), horizon_s=2 * HOUR,
              maintenance=[LATE]).run()
    # t=0 the arrival, t=600 the announce (nothing else happens then), t=5400 the window's end
    assert seen == [(0.0, ()), (600.0, ("fw",)), (5400.0, ())]


def test_maintenance_replay_a_bind_before_the_announce_may_overlap_one_after_it_may_not() -> None:
    # a is bound at t=0 on n0000, before the window is known: it runs into it, as in the
    # product; b bound on n0001 at t=900, after the announce, would run into it: an engine bug
    two = FleetShape(nodes=2, gpus_per_node=8)
    late = MaintenanceWindow("fw", ("n0000", "n0001"), 0.5 * HOUR, 1.5 * HOUR, announced_at=600.0)
    binds = {0.0: (Bind("a", (GpuPlacement("n0000", tuple(range(8))),)),),
             900.0: (Bind("b", (GpuPlacement("n0001", tuple(range(8))),)),)}
    trace = [job("a", 0, 8, HOUR, HOUR), job("b", 900, 8, HOUR, HOUR)]
    sim = Simulator(trace, two, lambda snapshot, config: _plan(binds.get(snapshot.now, ())),
                    SchedulerConfig(), horizon_s=2 * HOUR, maintenance=[late])
    with pytest.raises(SimulationError, match=r"t=900s: job b placed on n0001, whose maintenance window fw"):
        sim.run()


@pytest.mark.parametrize(("windows", "message"), [
    ([MaintenanceWindow("x", ("n0007",), 0, HOUR)], "no node named 'n0007'"),
    ([WINDOW, WINDOW], "'fw' is given twice"),
    ([MaintenanceWindow("x", ("n0000",), HOUR, HOUR)], "not after its start"),
    ([MaintenanceWindow("x", ("n0000",), HOUR, 2 * HOUR, announced_at=HOUR + 1)],
     "'x' is announced at 3601 s, after its start at 3600 s"),
], ids=["unknown-node", "same-id-twice", "empty-window", "announced-after-start"])
def test_maintenance_replay_refuses_windows_it_cannot_apply(windows, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        simulate([job("a", 0, 1, 60, 60)], ONE_NODE, horizon_s=HOUR, maintenance=windows)


def test_maintenance_file_parses_names_separated_by_spaces_or_semicolons() -> None:
    text = "id,nodes,start_s,end_s,reason\nrack3,n0000;n0001 n0002,3600,18000,cooling\n"
    (window,) = parse_maintenance(io.StringIO(text))
    assert window == MaintenanceWindow("rack3", ("n0000", "n0001", "n0002"), 3600.0, 18000.0, "cooling")


def test_maintenance_file_announced_s_is_when_the_window_became_known_and_defaults_to_the_start() -> None:
    text = "id,nodes,start_s,end_s,announced_s\nlate,n0000,3600,7200,1800\nnow,n0001,3600,7200,3600\n" \
           "old,n0002,3600,7200,\nzero,n0003,3600,7200,0\n"
    assert [(w.id, w.announced_at) for w in parse_maintenance(io.StringIO(text))] == [
        ("late", 1800.0), ("now", 3600.0), ("old", None), ("zero", None)]


@pytest.mark.parametrize(("text", "where"), [
    ("id,nodes,start_s\nw,n0000,0\n", "line 1, column 'end_s'"),
    ("id,nodes,start_s,end_s,owner\n", "line 1, column 'owner'"),
    ("id,nodes,start_s,end_s\nw,,0,60\n", "line 2, column 'nodes'"),
    ("id,nodes,start_s,end_s\nw,n0000,soon,60\n", "line 2, column 'start_s'"),
    ("id,nodes,start_s,end_s\nw,n0000,60,30\n", "line 2, column 'end_s'"),
    ("id,nodes,start_s,end_s\nw,n0000,0,60\nw,n0001,0,60\n", "line 3, column 'id'"),
    ("id,nodes,start_s,end_s,announced_s\nw,n0000,60,120,0\nv,n0000,60,120,61\n",
     r"line 3, column 'announced_s'.*announced \(61 s\) after it starts \(60 s\)"),
    ("id,nodes,start_s,end_s,announced_s\nw,n0000,60,120,soon\n", "line 2, column 'announced_s'"),
    ("id,nodes,start_s,end_s,announced_s\nw,n0000,60,120,-5\n", "line 2, column 'announced_s'"),
], ids=["missing-column", "unknown-column", "no-nodes", "not-a-number", "ends-before-start", "id-twice",
        "announced-after-start", "announced-not-a-number", "announced-negative"])
def test_maintenance_file_bad_cells_name_line_and_column(text: str, where: str) -> None:
    with pytest.raises(TraceError, match=where):
        parse_maintenance(io.StringIO(text))


def test_maintenance_cli_replays_the_windows_and_refuses_an_unknown_node(tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,submit_s,gpus,duration_s,runtime_limit_s,user\na,0,8,3600,3600,u\n")
    windows = tmp_path / "m.csv"
    windows.write_text("id,nodes,start_s,end_s\nfw,n0000,1800,5400\n")
    args = [sys.executable, "-m", "scheduler_core.sim", "--trace", str(trace), "--nodes", "1",
            "--horizon-min", "180", "--json", "--maintenance", str(windows)]
    done = subprocess.run(args, capture_output=True, text=True, cwd=REPO, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["wait_max_min"], report["maintenance_gpu_hours"]) == (90.0, 8.0)
    windows.write_text("id,nodes,start_s,end_s,announced_s\nfw,n0000,1800,5400,600\n")
    done = subprocess.run(args, capture_output=True, text=True, cwd=REPO, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)   # announced 10 min in: the job started at once, ran into it
    assert (report["wait_max_min"], report["maintenance_overrun_jobs"]) == (0.0, 1)
    windows.write_text("id,nodes,start_s,end_s\nfw,n0042,1800,5400\n")
    done = subprocess.run(args, capture_output=True, text=True, cwd=REPO, check=False, timeout=60)
    assert done.returncode == 2 and "no node named 'n0042'" in done.stderr and done.stdout == ""


def _plan(binds: tuple[Bind, ...]) -> Plan:
    return Plan(binds=binds, preemptions=(), resizes=(), reservations=(), pending=(), kills=(),
                fleet=FleetFigures(0, 0, 0, 0, {}, {}, {}), epoch=1)
