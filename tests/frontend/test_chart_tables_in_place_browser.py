"""The values table brought up to date in place (docs/dashboards.md, Conventions every chart keeps),
in Chromium. Until 6 Dec each live update wrote a time series' values table anew: a screen reader
inside it lost its place, the keyboard its focus."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import FleetSample
from tests.frontend.page_data import sample
from tests.frontend.test_browser_pages import browser, fill_the_fleet, session  # noqa: F401 (fixtures)
from tests.frontend.test_charts_by_keyboard_browser import _the_chart_ends_a_minute_ago, tab_to

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_live_update_keeps_the_values_table_and_the_focused_cell_whose_value_changes(session: Any) -> None:  # noqa: F811
    fill_the_fleet()
    _the_chart_ends_a_minute_ago()
    alice = session("alice")
    alice.open("/")
    page = alice.page
    tab_to(page, lambda el: el["tag"] == "summary" and el["chart"] == "stranded"
           and el["text"] == "Stranded GPUs: the value at each point")
    page.keyboard.press("Enter")

    # The keyboard (a screen reader's table cursor, as focus) on the newest point's stranded GPUs.
    newest = page.evaluate("""() => { const table = document.querySelector('#values-stranded table');
      table.qmMark = 'the same table';
      const row = table.tBodies[0].rows[0];
      row.cells[1].tabIndex = -1; row.cells[1].focus(); row.cells[1].qmMark = 'the same cell';
      row.cells[2].qmMark = 'an unchanged cell';
      return [...row.cells].map(c => c.textContent); }""")
    at = datetime.fromisoformat(newest[0] + "+00:00")
    assert FleetSample.objects.filter(at__gte=at, at__lt=at + timedelta(seconds=1)).update(stranded_gpus=int(newest[1]) + 10) == 1
    # ... and a cycle since: its point comes in at the top.
    sample(timezone.now(), stranded_gpus=6, allocated_gpus=50, reserved_gpus=1)

    page.evaluate("() => QM.poll()")
    after = page.evaluate("""() => { const table = document.querySelector('#values-stranded table');
      const focused = document.activeElement;
      return {table: table.qmMark || '', focused: focused.qmMark || focused.tagName, words: focused.textContent,
              row: focused.closest('tr') && focused.closest('tr').dataset.at,
              unchanged: [...table.querySelectorAll('td')].some(td => td.qmMark === 'an unchanged cell'),
              first: [...table.tBodies[0].rows[0].cells].map(c => c.textContent)}; }""")
    assert after["table"] == "the same table"
    assert after["focused"] == "the same cell" and after["row"] == newest[0]
    assert after["words"] == str(int(newest[1]) + 10)
    assert after["unchanged"]
    assert after["first"][1] == "6" and after["first"][0] > newest[0]
    # The table says what the figure draws, row for row.
    assert page.evaluate("""() => { const data = document.getElementById('chart-stranded').data;
      const want = data[0].x.map((x, i) => [x, ...data.map(t => String(t.y[i]))]).reverse();
      const have = [...document.querySelectorAll('#values-stranded tbody tr')].map(r => [...r.cells].map(c => c.textContent));
      return JSON.stringify(want) === JSON.stringify(have); }""")
