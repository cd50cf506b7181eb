"""A replay called as a function (the what-if page, the benches) says how many of its jobs could
never run, whatever the reason, beside the waits that leave them out.

Found in review (5 Dec): the command line refuses a trace with a job the fleet can never run,
but `simulate()` called directly dropped such a job from every wait figure and from
`jobs_total` (counted only under the name `jobs_rejected`, for the engine's CanNeverRun), and a
request the engine refuses (an invalid shape) was counted nowhere: it waited to the horizon,
its two hours counted in `wait_mean_min` and `jobs_pending_at_horizon`, as if it could start.
Now every job the engine finds can never run, or refuses, leaves the queue and is in
`SimResult.never_runnable`, counted as `jobs_never_runnable`."""

from __future__ import annotations

from scheduler_core.sim import FleetShape, TraceJob, simulate
from scheduler_core.sim.fleet import build_gpu_types, build_nodes, build_priority_classes
from scheduler_core.types import QuotaInfo

SHAPE = FleetShape(nodes=2, gpus_per_node=8, nodes_per_leaf=2, leaves_per_spine=1)
HORIZON_S = 7200.0


def test_every_job_that_can_never_run_is_named_and_counted_beside_the_waits() -> None:
    jobs = [
        TraceJob("fits", 0, 8, 600, 3600, "ann"),
        TraceJob("too-big", 0, 64, 600, 3600, "ann"),  # the fleet has 16 GPUs
        TraceJob("no-such-type", 0, 8, 600, 3600, "ann", gpu_type="tpu"),
        TraceJob("half-elastic", 0, 3, 600, 3600, "ann", min_gpus=2),  # the engine refuses: no max_gpus
    ]

    result = simulate(jobs, SHAPE, horizon_s=HORIZON_S)

    assert sorted(result.never_runnable) == ["half-elastic", "no-such-type", "too-big"]
    figures = result.as_dict()
    assert figures["jobs_never_runnable"] == result.jobs_never_runnable == 3
    assert (figures["jobs_total"], figures["jobs_done"], figures["jobs_pending_at_horizon"]) == (1, 1, 0)
    assert (figures["wait_mean_min"], figures["wait_max_min"]) == (0.0, 0.0)


def test_a_job_the_quota_table_can_never_cover_is_counted_the_same() -> None:
    jobs = [TraceJob("a", 0, 8, 600, 3600, "ann", team="vision"),
            TraceJob("wide", 0, 16, 600, 3600, "ann", team="vision")]
    quotas = (QuotaInfo(team="vision", gpu_type="gpu", nominal_gpus=8, borrowing_limit=0, cohort="research"),
              QuotaInfo(team="language", gpu_type="gpu", nominal_gpus=8, cohort="research"))

    result = simulate(jobs, SHAPE, horizon_s=HORIZON_S, nodes=build_nodes(SHAPE), gpu_types=build_gpu_types(SHAPE),
                      quotas=quotas, priority_classes=build_priority_classes(jobs))

    assert result.never_runnable == ("wide",)
    assert (result.as_dict()["jobs_never_runnable"], result.as_dict()["jobs_total"]) == (1, 1)


def test_a_replay_of_jobs_that_all_run_counts_none() -> None:
    result = simulate([TraceJob("a", 0, 8, 600, 3600, "ann"), TraceJob("b", 60, 16, 600, 3600, "ann")], SHAPE,
                      horizon_s=HORIZON_S)

    assert (result.never_runnable, result.as_dict()["jobs_never_runnable"]) == ((), 0)
    assert result.as_dict()["jobs_total"] == 2
