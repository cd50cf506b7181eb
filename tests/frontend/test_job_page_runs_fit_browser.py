"""In Chromium, on a 1,400 px desktop: a job's Runs table fits its panel, so every column, the
last one (Work lost) too, is in view without scrolling the table sideways.

Found walking through the demo as a researcher (5 Dec): every cell but "How it ended" kept to one
line, so the table was 1,361 px wide for any job (1,396 px for a gang of three nodes, whose Where
cell named them all on one line) in a 1,326 px panel, whatever the window: the Work lost column
was cut at "< 0.01 GP", to be scrolled to. Now the Bound, Started and Ended times may break
between date and clock, and Where between nodes, when the table would run past its box."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.services import accounting
from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from tests.controlplane.job_runs_story import bind_at, idle_nodes, preempted_then_succeeded
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FITS = """() => {
  const table = document.querySelector('table.runs');
  const box = table.parentElement;
  const last = table.querySelector('tbody tr:last-child td:last-child').getBoundingClientRect();
  return {table: table.scrollWidth, box: box.clientWidth, scrolled: box.scrollWidth,
          lastRight: last.right, boxRight: box.getBoundingClientRect().right,
          page: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth};
}"""


def test_the_runs_table_fits_its_panel_on_a_desktop(session: Any) -> None:  # noqa: F811
    now = timezone.now()
    twice = submit(user("alice"), SubmitRequest(name="twice-run", gpus=2)).job
    first, second, *gang_nodes = idle_nodes(5, "H100-80GB")
    preempted_then_succeeded(twice, first, second, now=now)
    gang = submit(user("alice"), SubmitRequest(name="gang-run", gpus=24, gpus_per_node=8)).job
    bind_at(gang, [(node, range(8), "") for node in gang_nodes[:2]] + [(first, range(8), "")],
            at=now - timedelta(minutes=30))

    alice = session("alice")
    for job, runs in ((twice, 2), (gang, 1)):
        alice.open(f"/jobs/{job.pk}/")
        assert alice.page.locator("table.runs tbody tr").count() == runs
        fits = alice.page.evaluate(FITS)
        alice.screenshot(f"job-runs-fit-{job.name}")

        assert fits["table"] <= fits["box"], fits
        assert fits["scrolled"] <= fits["box"] and fits["lastRight"] <= fits["boxRight"] + 0.5, fits
        assert fits["page"] <= fits["viewport"], fits
    # The gang's row still names every node it runs on, in one cell.
    where = alice.page.locator("table.runs tbody tr td.where").inner_text()
    assert all(node.name in where for node in (*gang_nodes[:2], first)), where


# Each Runs cell's lines (the tops its characters are drawn at), by the column's heading.
CELL_LINES = """() => {
  const table = document.querySelector('table.runs');
  const heads = [...table.querySelectorAll('thead th')].map(th => th.innerText.replace(/\\u00ad/g, '').trim());
  const lines = el => { const r = document.createRange(); r.selectNodeContents(el);
    return new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top))).size; };
  return [...table.querySelectorAll('tbody tr')].map(tr => Object.fromEntries(
    [...tr.querySelectorAll('th, td')].map((cell, i) => [heads[i], [cell.innerText.replace(/\\s+/g, ' ').trim(), lines(cell)]])));
}"""


def test_the_runs_table_fits_a_laptop_with_its_widest_rows(session: Any) -> None:  # noqa: F811
    """At 1,000 px (found looking at it, 6 Dec): a gang stopped at its runtime limit after three
    days ("RuntimeLimitExceeded", "$4,440.25") made the table 947 px wide in its 942 px box, Work
    lost out of sight, and every run's Ran for (Elapsed since 6 Dec) read "90" / "min", "3.1" / "days", its number on one
    line and its unit on the next, while the Generation column kept 83 px for a one-digit number.
    Now a duration holds together, the heading "Generation" may hyphenate ("Gener-" / "ation"),
    and a reason code may break between its words ("RuntimeLimit" / "Exceeded")."""
    now = timezone.now()
    twice = submit(user("alice"), SubmitRequest(name="twice-run", gpus=2)).job
    first, second, *gang_nodes = idle_nodes(5, "H100-80GB")
    preempted_then_succeeded(twice, first, second, now=now)
    gang = submit(user("alice"), SubmitRequest(name="gang-run", gpus=24, gpus_per_node=8)).job
    bind_at(gang, [(node, range(8), "") for node in (*gang_nodes[:2], first)], at=now - timedelta(days=3, hours=2))
    run_cycle("test", now=now)  # past its runtime limit: stopped
    accounting.catch_up(now)
    gang.refresh_from_db()
    assert gang.state == "preempting"

    alice = session("alice")
    alice.page.set_viewport_size({"width": 1000, "height": 900})
    for job, runs in ((twice, 2), (gang, 1)):
        alice.open(f"/jobs/{job.pk}/")
        assert alice.page.locator("table.runs tbody tr").count() == runs
        fits = alice.page.evaluate(FITS)
        rows = alice.page.evaluate(CELL_LINES)
        alice.screenshot(f"job-runs-fit-1000-{job.name}")

        assert fits["table"] <= fits["box"] and fits["lastRight"] <= fits["boxRight"] + 0.5, fits
        assert all(row["Elapsed"][1] == 1 for row in rows), [row["Elapsed"] for row in rows]
    assert "RuntimeLimitExceeded" in rows[0]["How it ended"][0] and "$4," in rows[0]["Cost"][0], rows
