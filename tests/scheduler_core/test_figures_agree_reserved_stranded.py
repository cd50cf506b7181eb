"""Fleet figures count GPUs held for a waiting job's reservation as what they are: idle.

Before, the cycle's figures (recorded per cycle, read by /metrics and the overview) left the
GPUs held for the head's reservation out of both the stranded GPUs and the largest free
block, while the fragmentation API (which reads live allocations) counted them: on two partly
used nodes with an 8-GPU whole-node job waiting, /metrics said stranded 5 and the API 11.
Seed 000's stranded GPUs are the free GPUs on partly used nodes while a whole-node job
waits; GPUs kept idle for that job's reservation are such GPUs, and ``reserved_gpus`` says
how many of the idle GPUs are held."""

from __future__ import annotations

from engine_builders import make_cluster, make_job, make_running

from scheduler_core import SchedulerConfig


def two_partly_used_nodes():
    return (
        make_cluster().nodes(1, prefix="a").nodes(1, gpu_type="h100", prefix="h", pool="h100").at(600)
        .running(make_running(make_job("small-a").gpus(2).types("a100").limit(3600)).on("a0", 0, 1).started(0),
                 make_running(make_job("small-h").gpus(3).types("h100").limit(7200)).on("h0", 0, 1, 2).started(0))
        .pending(make_job("big").gpus(8).per_node(8))
    )


def test_gpus_held_for_the_reservation_count_as_stranded_and_in_the_largest_free_block():
    plan = two_partly_used_nodes().plan(SchedulerConfig())
    assert plan.reservations, "the waiting whole-node job holds GPUs for its reservation"
    f = plan.fleet
    held = f.reserved_gpus
    assert held > 0
    assert f.allocated_gpus == 5
    assert f.free_gpus + f.reserved_gpus == 11
    assert f.stranded_gpus == 11
    assert f.largest_free_block_by_pool == {"h100": 5, "main": 6}


def test_reserved_figures_do_not_depend_on_whether_the_reservation_is_made():
    """Without backfill no reservation holds anything: the same idle GPUs, the same figures."""
    with_reservation = two_partly_used_nodes().plan(SchedulerConfig()).fleet
    without = two_partly_used_nodes().plan(SchedulerConfig(backfill=False)).fleet
    assert without.reserved_gpus == 0
    assert (with_reservation.stranded_gpus, dict(with_reservation.largest_free_block_by_pool)) == (
        without.stranded_gpus, dict(without.largest_free_block_by_pool))
