"""In Chromium, at 1,400 and 1,000 px: a time in the job page's Runs table and in the history
breaks only between its date and its clock, and a node's name never breaks.

Found walking the demo as a researcher (5 Dec): 3908984 let the Runs table's times break
"between date and clock", but a date breaks at its hyphens too, so a preempted job's runs read
"2026-12-" / "05" / "22:02:26" on a 1,400 px desktop, and Where read "a100-" / "03 ×1"; the
history at 1,000 px read "2026-" / "12-" / "05" / "21:57:41" / "UTC", and its Ran on column
"h100-" / "01" even at 1,400 px. Now the date, the clock and each node's name hold together."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.services import accounting
from controlplane.services.jobs import SubmitRequest, submit
from tests.controlplane.job_runs_story import idle_nodes, preempted_then_succeeded
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each cell's text as the lines it is drawn on: its characters grouped by the top of their box.
LINES = """(selector) => [...document.querySelectorAll(selector)].map(cell => {
  const lines = [];
  let top = null;
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const box = range.getClientRects()[0];
      if (!box || !box.width) continue;  // a space where the line breaks
      if (top === null || box.top > top + 2) { lines.push(''); top = box.top; }
      lines[lines.length - 1] += node.data[i];
    }
  }
  return lines.map(line => line.trim());
})"""


def _broken(lines: list[str]) -> list[str]:
    """The lines that end inside a date or a node's name (at one of its hyphens)."""
    return [line for line in lines[:-1] if line.endswith("-")]


def test_times_and_node_names_break_whole_in_the_runs_and_the_history(session: Any) -> None:  # noqa: F811
    now = timezone.now()
    twice = submit(user("alice"), SubmitRequest(name="twice-run", gpus=2)).job
    first, second = idle_nodes(2, "H100-80GB")
    preempted_then_succeeded(twice, first, second, now=now)
    accounting.catch_up(timezone.now())

    alice = session("alice")
    page = alice.page
    for width in (1400, 1000):
        page.set_viewport_size({"width": width, "height": 1000})
        alice.open(f"/jobs/{twice.pk}/")
        assert page.locator("table.runs tbody tr").count() == 2
        whens = page.evaluate(LINES, "table.runs td.when")
        wheres = page.evaluate(LINES, "table.runs td.where")
        alice.screenshot(f"runs-times-{width}")
        assert all(lines for lines in whens) and all(lines for lines in wheres)
        assert not [lines for lines in whens + wheres if _broken(lines)], (width, whens, wheres)
        assert any(first.name in "".join(lines) for lines in wheres), wheres

        alice.open("/history/")
        assert page.locator("#history-table tbody tr").count() >= 1
        times = page.evaluate(LINES, "#history-table tbody td time")
        ran_on = page.evaluate(LINES, "#history-table tbody td:last-child")
        alice.screenshot(f"history-times-{width}")
        assert times and not [lines for lines in times + ran_on if _broken(lines)], (width, times, ran_on)
        assert not [lines for lines in times if lines[0].endswith(":")], times  # nor inside a clock
