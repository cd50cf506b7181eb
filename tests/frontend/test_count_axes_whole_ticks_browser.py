"""In Chromium: an axis that counts jobs or GPUs is ticked at whole numbers, however few.

Demo walk, 8 Dec: the overview's queue chart with nobody waiting was ticked 0, 0.2, 0.4, 0.6,
0.8, 1 "pending jobs"; plotly ticks a short range every 0.2 or 0.5, so a queue of 2 read "0.5
pending jobs", a pool with 3 free GPUs on a node "1.5 GPUs on one node", a team with one failed
job "0.5 jobs". A count axis whose highest value is small is now ticked at every whole number
(`figures.WHOLE_TICKS_UP_TO`); above it plotly's own ticks are whole already."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import FleetSample
from frontend import figures
from tests.frontend.page_data import sample
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _ticks(page: Any, key: str) -> list[str]:
    return [t.strip() for t in page.evaluate(
        f"() => [...document.querySelectorAll('#chart-{key} .ytick text')].map(t => t.textContent)")]


def _whole(ticks: list[str]) -> bool:
    return bool(ticks) and all(t.replace(",", "").isdigit() for t in ticks)


def test_the_overviews_count_axes_tick_whole_numbers_while_small(session: Any) -> None:  # noqa: F811
    now = timezone.now()
    FleetSample.objects.all().delete()
    for i in range(12):
        # two jobs waiting at most, 3 GPUs stranded of 4 free, a largest free block of 2 or 3
        sample(now - timedelta(seconds=5 * (11 - i)), pending_jobs=i % 3, pending_by_priority={"research": i % 3},
               stranded_gpus=3, total_gpus=128, allocated_gpus=124, unavailable_gpus=0,
               largest_free_block_by_pool={"h100": 2 + i % 2, "a100": 1})
    admin = session("admin")
    admin.open("/?window=1h")
    for key in ("queue", "stranded", "free_block"):
        assert admin.page.locator(f"[data-chart={key}]").get_attribute("data-rendered") == "plot"
        ticks = _ticks(admin.page, key)
        assert _whole(ticks), f"{key}: {ticks}"


def test_large_counts_keep_plotlys_own_ticks() -> None:
    t0 = timezone.now()
    samples = [{"at": t0 + timedelta(seconds=5 * i), "pending_by_priority": {"research": 40 + i},
                "pending_by_team": {}} for i in range(3)]
    assert "dtick" not in figures.queue_depth(samples, ["research"]).figure["layout"]["yaxis"]
    # a stack's sum decides, not its layers: 3 + 3 waiting is past the whole-number ticks' range
    stacked = [{"at": t0, "pending_by_priority": {"research": 3, "batch": 3}, "pending_by_team": {}}]
    assert "dtick" not in figures.queue_depth(stacked, ["research", "batch"]).figure["layout"]["yaxis"]
