"""In Chromium: the overview's utilization chart draws from where the fleet's record begins, on
the page and after a live update, and its "All" is that span (docs/dashboards.md, Overview).

Demo walk, 6 Dec: a fresh demo whose accounting first rolled up at 19:03:39 had its chart (one
point per hour under the last 24 hours) drawn from 19:00, as if the fleet had been measured
before it existed. tests/frontend/test_overview_utilization_starts_with_history.py has the
figures; this is what the browser draws of them."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.services import accounting
from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from frontend.figures import ts
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _drawn_from(page: Any) -> list[str]:
    """Where the plot's x axis starts, to the second, and where its first point is."""
    start, first = page.evaluate("""() => { const plot = document.getElementById('chart-utilization');
      return [String(plot._fullLayout.xaxis.range[0]), plot.data[0].x[0]]; }""")
    return [datetime.fromisoformat(start[:19]).strftime("%Y-%m-%d %H:%M:%S"), first]


def test_the_utilization_chart_starts_where_the_record_does_and_a_live_update_keeps_it(session: Any) -> None:  # noqa: F811
    now = timezone.now()
    # the accounting's first minute 23 minutes before the hour: its hour bucket starts 37 minutes
    # before anything was measured, whatever the time the test runs
    began = accounting.floor_to(now, accounting.HOUR) - timedelta(minutes=23)
    submit(user("alice"), SubmitRequest(name="vision-0", gpus=8, gpu_types=("H100-80GB",)))
    run_cycle("test", now=began)
    accounting.catch_up(now)

    alice = session("alice")
    alice.open("/?window=24h")
    page = alice.page
    box = page.locator("[data-chart=utilization]")
    assert box.get_attribute("data-rendered") == "plot"
    assert _drawn_from(page) == [ts(began), ts(began)]  # it drew from the hour before, 37 minutes early
    assert f"The accounting's record begins at {ts(began)} UTC" in box.inner_text()
    assert page.evaluate("""() => [...document.querySelectorAll('[data-chart=utilization] [data-range-list] [aria-pressed=true]')]
      .map(b => b.textContent)""") == ["All"]

    accounting.catch_up(timezone.now())
    page.evaluate("() => QM.poll()")
    assert _drawn_from(page) == [ts(began), ts(began)]
    assert f"The accounting's record begins at {ts(began)} UTC" in box.inner_text()
