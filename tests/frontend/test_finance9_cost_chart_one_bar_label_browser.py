"""In Chromium: /showback/'s cost chart over a window inside one hour (a 30m window: one bar, for
that hour) labels its x-axis with the bar's hour (finance review, 7 Dec). The figure ticked the
hours' starts from midnight, an hour apart, but plotly's range around one bar drawn inside its
hour held no hour's start, so the axis had no tick and no label at all: a bar of $ with nothing
saying when."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controlplane.services import accounting
from tests.frontend.page_data import both_teams_ran_for
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LABELS = """() => {
  const plot = document.querySelector('[data-chart="cost_over_time"] .chart');
  const box = plot.getBoundingClientRect();
  const labels = [...plot.querySelectorAll('.xtick text')].filter(t => {
    const r = t.getBoundingClientRect();
    return t.textContent.trim() && r.width > 0 && r.left >= box.left && r.right <= box.right;
  }).map(t => t.textContent);
  const ms = v => typeof v === 'number' ? v : new Date(String(v).replace(' ', 'T') + 'Z').getTime();
  return {labels, bars: [...new Set(plot.data.flatMap(trace => trace.x.map(ms)))],
          range: plot._fullLayout.xaxis.range.map(ms)};
}"""


@pytest.mark.parametrize("minutes", [(10, 40), (0, 30), (30, 60)])
def test_a_window_inside_one_hour_labels_its_one_bar(session: Any, submit_as: Any, minutes: tuple[int, int]) -> None:  # noqa: F811
    now = both_teams_ran_for(submit_as, hours=2)
    hour = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=1)
    start, end = hour + timedelta(minutes=minutes[0]), hour + timedelta(minutes=minutes[1])
    finn = session("finn")
    finn.open(f"/showback/?window={start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}")
    drawn = finn.page.evaluate(LABELS)
    assert drawn["bars"] == [hour.timestamp() * 1000], drawn   # one bar, for that hour
    assert drawn["labels"], drawn
    assert any(f"{hour:%H:%M}" in label for label in drawn["labels"]), drawn
    # the bar still fills most of the plot: the label is not bought by zooming out to many hours
    assert drawn["range"][1] - drawn["range"][0] <= 2 * 3600 * 1000, drawn
    # zoomed in and reset (a double click's autorange), the axis still names the hour
    zoom = [f"{hour + timedelta(minutes=m):%Y-%m-%d %H:%M}" for m in (20, 25)]
    finn.page.evaluate("""zoom => Plotly.relayout(document.querySelector('[data-chart="cost_over_time"] .chart'),
      {'xaxis.range': zoom})""", zoom)
    finn.page.evaluate("""() => Plotly.relayout(document.querySelector('[data-chart="cost_over_time"] .chart'),
      {'xaxis.autorange': true})""")
    again = finn.page.evaluate(LABELS)
    assert any(f"{hour:%H:%M}" in label for label in again["labels"]), again
    assert finn.errors == []
