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


@pytest.mark.parametrize(("windows", "message"), [
    ([MaintenanceWindow("x", ("n0007",), 0, HOUR)], "no node named 'n0007'"),
    ([WINDOW, WINDOW], "'fw' is given twice"),
    ([MaintenanceWindow("x", ("n0000",), HOUR, HOUR)], "not after its start"),
], ids=["unknown-node", "same-id-twice", "empty-window"])
def test_maintenance_replay_refuses_windows_it_cannot_apply(windows, message) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=message):
        simulate([job("a", 0, 1, 60, 60)], ONE_NODE, horizon_s=HOUR, maintenance=windows)


def test_maintenance_file_parses_names_separated_by_spaces_or_semicolons() -> None:
    text = "id,nodes,start_s,end_s,reason\nrack3,n0000;n0001 n0002,3600,18000,cooling\n"
    (window,) = parse_maintenance(io.StringIO(text))
    assert window == MaintenanceWindow("rack3", ("n0000", "n0001", "n0002"), 3600.0, 18000.0, "cooling")


@pytest.mark.parametrize(("text", "where"), [
    ("id,nodes,start_s\nw,n0000,0\n", "line 1, column 'end_s'"),
    ("id,nodes,start_s,end_s,owner\n", "line 1, column 'owner'"),
    ("id,nodes,start_s,end_s\nw,,0,60\n", "line 2, column 'nodes'"),
    ("id,nodes,start_s,end_s\nw,n0000,soon,60\n", "line 2, column 'start_s'"),
    ("id,nodes,start_s,end_s\nw,n0000,60,30\n", "line 2, column 'end_s'"),
    ("id,nodes,start_s,end_s\nw,n0000,0,60\nw,n0001,0,60\n", "line 3, column 'id'"),
], ids=["missing-column", "unknown-column", "no-nodes", "not-a-number", "ends-before-start", "id-twice"])
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
    windows.write_text("id,nodes,start_s,end_s\nfw,n0042,1800,5400\n")
    done = subprocess.run(args, capture_output=True, text=True, cwd=REPO, check=False, timeout=60)
    assert done.returncode == 2 and "no node named 'n0042'" in done.stderr and done.stdout == ""


def _plan(binds: tuple[Bind, ...]) -> Plan:
    return Plan(binds=binds, preemptions=(), resizes=(), reservations=(), pending=(), kills=(),
                fleet=FleetFigures(0, 0, 0, 0, {}, {}, {}), epoch=1)
