"""Among tied jobs, the gangs of whole nodes that the free whole nodes could hold now are tried
widest first (``queue.widest_fitting_gangs_first``, ``SchedulerConfig.widest_gang_first``):
two tied gangs that each fit but not together, the wider one starts and the narrower one,
which needs fewer nodes to free, waits. Seed week s13 at load 0.85 (hour 162.65): a 64-GPU
and a 32-GPU job submitted together, 8 whole nodes free; shortest-first started the 32-GPU
one, the 64-GPU one waited 33 min on nodes held for it, and the week's ``allocated`` fell
short of the seed's."""

from __future__ import annotations

from engine_builders import bound, make_cluster, make_job, make_running, why

from scheduler_core import SchedulerConfig, schedule
from scheduler_core.cycle import _context
from scheduler_core.plugins.registry import build_plugins
from scheduler_core.queue import order_queue, widest_fitting_gangs_first

HOUR = 3600.0


def twelve_nodes_four_busy():
    """Twelve 8-GPU nodes, the first four busy for 3 more hours: 8 whole nodes free."""
    cluster = make_cluster().nodes(12).at(10 * HOUR)
    for n in range(4):
        cluster.running(make_running(make_job(f"r{n}").gpus(8).limit(4 * HOUR)).whole(f"n{n}")
                        .started(9 * HOUR))
    return cluster


def test_of_two_tied_gangs_that_fit_but_not_together_the_wider_starts():
    plan = (
        twelve_nodes_four_busy()
        .pending(make_job("wide").gpus(64).limit(10 * HOUR).submitted(10 * HOUR),
                 make_job("narrow").gpus(32).limit(8 * HOUR).submitted(10 * HOUR))
        .plan()
    )
    assert set(bound(plan)) == {"wide"}
    # the narrower gang needs 4 of the busy nodes, which free in 3 h
    assert why(plan, "narrow").reason == "WaitingForReservation"
    assert why(plan, "narrow").eta == 13 * HOUR


def test_widest_gang_first_off_keeps_shortest_first():
    plan = (
        twelve_nodes_four_busy()
        .pending(make_job("wide").gpus(64).limit(10 * HOUR).submitted(10 * HOUR),
                 make_job("narrow").gpus(32).limit(8 * HOUR).submitted(10 * HOUR))
        .plan(SchedulerConfig(widest_gang_first=False))
    )
    assert set(bound(plan)) == {"narrow"}


def test_a_wider_gang_that_does_not_fit_now_keeps_its_place_behind_the_narrower():
    # 9 nodes needed, 8 free: the 72-GPU gang cannot start now, so the 32-GPU one goes first
    # as before, and the wide one holds the reservation
    plan = (
        twelve_nodes_four_busy()
        .pending(make_job("too-wide").gpus(72).limit(10 * HOUR).submitted(10 * HOUR),
                 make_job("narrow").gpus(32).limit(8 * HOUR).submitted(10 * HOUR))
        .plan()
    )
    assert set(bound(plan)) == {"narrow"}
    assert why(plan, "too-wide").reason == "WaitingForReservation"


def test_an_older_narrower_gang_is_not_tied_and_goes_first():
    # one aging point apart: the order, not the tie-break, decides
    plan = (
        twelve_nodes_four_busy()
        .pending(make_job("wide").gpus(64).limit(10 * HOUR).submitted(10 * HOUR),
                 make_job("narrow").gpus(32).limit(8 * HOUR).submitted(8.5 * HOUR))
        .plan()
    )
    assert set(bound(plan)) == {"narrow"}


def test_jobs_smaller_than_a_node_keep_their_place_among_tied_gangs():
    # two whole nodes free; a tied 4-GPU job with a shorter limit still goes first, and the
    # 16-GPU gang then finds one whole node only
    plan = (
        make_cluster().nodes(2).at(HOUR)
        .pending(make_job("gang").gpus(16).limit(9 * HOUR).submitted(HOUR),
                 make_job("small").gpus(4).limit(2 * HOUR).submitted(HOUR))
        .plan()
    )
    assert set(bound(plan)) == {"small"}


def test_only_the_fitting_gangs_move_and_equally_wide_ones_keep_shortest_first():
    snap = (
        twelve_nodes_four_busy()
        .pending(make_job("s1").gpus(1).limit(1 * HOUR).submitted(10 * HOUR),
                 make_job("g16-short").gpus(16).limit(2 * HOUR).submitted(10 * HOUR),
                 make_job("g72").gpus(72).limit(3 * HOUR).submitted(10 * HOUR),
                 make_job("g16-long").gpus(16).limit(4 * HOUR).submitted(10 * HOUR),
                 make_job("g32").gpus(32).limit(5 * HOUR).submitted(10 * HOUR),
                 make_job("s2").gpus(2).limit(6 * HOUR).submitted(10 * HOUR))
        .snapshot()
    )
    config = SchedulerConfig()
    ctx = _context(snap, config, build_plugins(config), None)
    ordered = order_queue(ctx)
    assert [s.id for s in ordered] == ["s1", "g16-short", "g72", "g16-long", "g32", "s2"]
    assert [s.id for s in widest_fitting_gangs_first(ctx, ordered)] == [
        "s1", "g32", "g72", "g16-short", "g16-long", "s2"]
    # the plan follows it: after the 1-GPU job (on one of the free nodes) the 32-GPU gang
    # takes 4 of the 7 whole nodes left, the 72-GPU one gets the reservation, and of the
    # 16-GPU ones only the shorter fits (and ends before the reservation's start)
    plan = schedule(snap, config)
    assert set(bound(plan)) == {"s1", "g32", "g16-short", "s2"}
    assert why(plan, "g72").reason == "WaitingForReservation"
