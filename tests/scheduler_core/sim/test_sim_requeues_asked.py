"""A requeue someone asked for while a job ran, not held (``qm requeue``: ``TraceJob.requeued_at``),
is replayed as the control plane does it: a job running in the replay then is stopped after its
class's grace period and goes straight back to the queue, from its last checkpoint.

Until 7 Dec the simulator knew only a requeue held (``TraceHold.requeues``): the what-if replay
ran a job its user had stopped and requeued as if nobody had, one run from its submission."""

from __future__ import annotations

import pytest

from scheduler_core.sim import FleetShape, TraceJob, simulate

SHAPE = FleetShape(nodes=2, gpus_per_node=8, nodes_per_leaf=2, leaves_per_spine=1)
HORIZON_S = 4 * 3600.0


def job(job_id: str, gpus: int = 8, duration_s: float = 1800, submit_s: float = 0, **fields: object) -> TraceJob:
    return TraceJob(job_id, submit_s, gpus, duration_s, 3600, "ann", **fields)  # type: ignore[arg-type]


def figures(jobs: list[TraceJob], horizon_s: float = HORIZON_S) -> dict[str, float | int | None]:
    return simulate(jobs, SHAPE, horizon_s=horizon_s).as_dict()


def test_a_requeue_stops_the_job_running_then_and_it_runs_again_at_once() -> None:
    # asked at 600 s: stopped at 630 s (the default class's 30 s grace), back in line and bound
    # again at once, its 1800 s run from scratch (no checkpoint): GPUs busy 630 + 1800 s
    result = figures([job("runs", requeued_at=(600.0,))])

    assert (result["jobs_requeued"], result["jobs_done"], result["preemptions"]) == (1, 1, 0)
    assert result["wait_max_min"] == 0.0
    assert result["allocated"] == pytest.approx(8 * 2430 / (16 * HORIZON_S))


def test_a_requeued_job_keeps_its_work_to_the_last_checkpoint() -> None:
    # checkpoints every 500 s: stopped at 630 s it keeps 500 s of its 1800 and needs 1300 s more,
    # done at 1930 s; from scratch it would still run at 2000 s
    kept = figures([job("runs", checkpoint_interval_s=500, requeued_at=(600.0,))], horizon_s=2000.0)
    assert (kept["jobs_done"], kept["jobs_running_at_horizon"]) == (1, 0)
    lost = figures([job("runs", requeued_at=(600.0,))], horizon_s=2000.0)
    assert (lost["jobs_done"], lost["jobs_running_at_horizon"]) == (0, 1)


def test_a_requeue_of_a_job_not_running_then_changes_nothing() -> None:
    # the fleet is full until 1800 s: "waits" is still waiting when its requeue comes, and one
    # asked after a job ended stops nothing either
    result = figures([job("full", gpus=16), job("waits", requeued_at=(600.0,)),
                      job("ended", submit_s=3600, duration_s=600, requeued_at=(4500.0,))])

    assert (result["jobs_requeued"], result["jobs_done"]) == (0, 3)
    assert result["wait_max_min"] == pytest.approx(30.0)


def test_a_trace_without_requeues_reports_as_before() -> None:
    assert "jobs_requeued" not in figures([job("a"), job("b")])
