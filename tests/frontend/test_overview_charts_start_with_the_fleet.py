"""The overview's charts of the fleet's GPUs (stranded and free GPUs, the largest free block per
pool) start with the first cycle that counted a GPU: the loop runs before any agent registers,
and its samples then drew 0 free, 0 stranded and a free block of 0 in every pool before there
was a fleet (the demo's first seconds, 6 Dec; a deployment's days before its first node). The
queue's chart keeps them: jobs wait before any node joins."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from frontend.figures import ts
from tests.frontend.page_data import sample

pytestmark = pytest.mark.django_db


def _charts(client) -> dict:
    return client.get("/ui/overview.json?window=1h").json()["charts"]


def test_the_fleet_charts_start_with_its_first_gpu_and_say_so(client_for) -> None:
    now = timezone.now()
    times = [now - timedelta(seconds=5 * (20 - i)) for i in range(20)]
    for i, at in enumerate(times):
        if i < 6:  # the loop ran; no agent had registered
            sample(at, total_gpus=0, allocated_gpus=0, stranded_gpus=0, largest_free_block_by_pool={},
                   pending_by_priority={"research": 3})
        else:
            sample(at)
    charts = _charts(client_for("finn"))

    for key in ("stranded", "free_block"):
        xs = {trace["x"][0] for trace in charts[key]["figure"]["data"]}
        assert xs == {ts(times[6])}, (key, xs)  # it drew from times[0]: 0 of a fleet not yet there
        assert charts[key]["ranges"]["start"] == ts(times[6])
        assert f"The fleet had no GPU before {ts(times[6])} UTC: nothing drawn before." in charts[key]["caption"]
    # the queue waited before the fleet was there: its chart starts with the first cycle
    assert {trace["x"][0] for trace in charts["queue"]["figure"]["data"]} == {ts(times[0])}
    assert "no GPU before" not in charts["queue"]["caption"]


def test_a_fleet_with_gpus_from_the_start_says_nothing(client_for) -> None:
    now = timezone.now()
    times = [now - timedelta(seconds=5 * (10 - i)) for i in range(10)]
    for at in times:
        sample(at)
    charts = _charts(client_for("finn"))
    assert {trace["x"][0] for trace in charts["stranded"]["figure"]["data"]} == {ts(times[0])}
    assert "no GPU before" not in charts["stranded"]["caption"]


def test_a_window_whose_fleet_never_had_a_gpu_keeps_its_zeros(client_for) -> None:
    now = timezone.now()
    for i in range(5):
        sample(now - timedelta(seconds=5 * (5 - i)), total_gpus=0, allocated_gpus=0, stranded_gpus=0,
               largest_free_block_by_pool={})
    charts = _charts(client_for("finn"))
    assert not charts["stranded"]["empty"] and "no GPU before" not in charts["stranded"]["caption"]
