"""The embedded default's scheduling loop (`make demo`) runs a cycle when one is asked for.

`triggers.request_cycle` sets `triggers.cycle_requested` in a process that runs the loop itself, and
its comment said the loop would wake on it; the loop waited out its whole interval instead, so
a job submitted in the demo started up to CYCLE_INTERVAL_S later. Requests within
CYCLE_DEBOUNCE_S of a round's start share the next round, as the Celery path's debounce makes
them share one cycle.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from controlplane import embedded, triggers
from controlplane.models import Allocation
from controlplane.services import jobs
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import build_loop_fleet, register_node


@pytest.mark.django_db(transaction=True)
def test_the_demo_loop_binds_a_submitted_job_within_a_second_not_at_its_interval(settings: Any) -> None:
    settings.QM = {**settings.QM, "IN_PROCESS_LOOP": True, "CYCLE_INTERVAL_S": 30, "CYCLE_DEBOUNCE_S": 0.2}
    fleet = build_loop_fleet()
    register_node("n-1")
    alice = f.make_user("alice", team=fleet.team)
    triggers.cycle_requested.clear()
    loop = embedded.scheduling_loop()
    loop.start()
    try:
        time.sleep(0.5)  # its first round is done: a bind now comes from the request
        submitted_at = time.monotonic()
        job = jobs.submit(alice, jobs.SubmitRequest(name="train", gpus=1)).job
        while not Allocation.objects.filter(job=job).exists() and time.monotonic() - submitted_at < 10:
            time.sleep(0.05)
        latency = time.monotonic() - submitted_at
    finally:
        loop.stop()
        loop.join(5)
    assert Allocation.objects.filter(job=job).exists()
    assert latency < 2.0, latency  # woken by the submit's request, not at its 30 s interval


def test_requests_within_the_gap_share_one_round() -> None:
    wake = threading.Event()
    rounds: list[float] = []
    loop = embedded.EmbeddedLoop("rounds", 30.0, [lambda: rounds.append(time.monotonic())],
                                 wake=wake, min_gap_s=0.3)
    loop.start()
    try:
        time.sleep(0.1)  # the first round has run
        for _ in range(5):
            wake.set()
            time.sleep(0.02)
        time.sleep(0.8)
    finally:
        loop.stop()
        loop.join(5)
    assert len(rounds) == 2  # the first, and one for the five requests
    assert rounds[1] - rounds[0] >= 0.3


def test_in_the_demo_every_submit_wakes_the_loop_even_within_the_debounce_window(settings: Any) -> None:
    # Through the broker a submit skips the Redis round trip while its process's last request's
    # window is open (that cycle runs after the window closes and sees it). The demo's loop may
    # already have read the database when the second submit commits: it must be woken again.
    settings.QM = {**settings.QM, "IN_PROCESS_LOOP": True, "CYCLE_DEBOUNCE_S": 30}
    triggers.cycle_requested.clear()
    jobs._request_cycle()
    assert triggers.cycle_requested.is_set()
    triggers.cycle_requested.clear()  # the loop woke and began its cycle

    jobs._request_cycle()

    assert triggers.cycle_requested.is_set()
