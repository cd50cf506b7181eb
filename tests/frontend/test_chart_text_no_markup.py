"""Words people typed reach the charts as words, never as Plotly markup.

Plotly draws a string's `<a href>`, `<span style>`, `<b>`, ... as markup, in axis labels, legends
and hover boxes alike: a researcher's job name `<a href="https://evil.example/">re-login</a>`
was a clickable link (target _blank) in finance's and the admins' "Where the money went"; a hold
or requeue reason one in the team's job timeline; a pool name an agent registered one in
everyone's heat map. Every figure now leaves the server with `<` written `&lt;` except the line
breaks and hover boxes the charts themselves draw (`<br>`, `<extra>`), which Plotly shows as the
very characters typed (frontend/figures.py, `_figure`). Until 6 Dec the strings went as typed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Node
from frontend import figures
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session  # noqa: F401 (fixtures)

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
LINK = '<a href="https://evil.example/">re-login</a>'
STYLED = '<span style="font-size:80px">big</span>'


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def test_a_timeline_says_a_reason_with_markup_as_typed_and_keeps_its_own_line_breaks() -> None:
    segments = [{"state": "pending", "start": T0, "end": None}]
    events = [{"created_at": T0, "kind": "job.held", "reason": "Held", "message": f"Held by alice: {LINK}"}]

    chart = figures.job_timeline(segments, events, now=T0 + timedelta(minutes=5))

    said = [s for s in _strings(chart.figure) if "re-login" in s]
    assert said and all("<a" not in s and "&lt;a href" in s for s in said)
    marks = next(t for t in chart.figure["data"] if t["name"] == "events")
    assert "<br>" in marks["hovertext"][0]  # the chart's own line break stays one


def test_a_job_name_with_markup_is_a_label_not_a_link_in_the_cost_split() -> None:
    row = {"name": LINK, "is_total": False, "is_idle": False, "cost_usd": 10.0, "cost_productive_usd": 6.0,
           "cost_active_only_usd": 3.0, "cost_allocated_only_usd": 1.0}
    chart = figures.cost_breakdown([row, {**row, "name": STYLED}], "job")

    figure = json.dumps(chart.figure)
    assert "<a " not in figure and "<span" not in figure
    assert chart.figure["data"][0]["y"] == ['&lt;a href="https://evil.example/">re-login&lt;/a>',
                                            '&lt;span style="font-size:80px">big&lt;/span>']


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_pool_name_with_markup_shows_as_typed_in_the_heat_map_in_chromium(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    Node.objects.filter(name="h100-03").update(pool=LINK)

    alice.open("/")

    chart = alice.page.locator('[data-chart="heatmap"]')
    expect(chart.locator(".main-svg").first).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    labels = chart.locator("g.ytick text").all_text_contents()
    assert f"{LINK} / h100-03" in labels  # the characters typed
    assert alice.page.locator(".chart-box svg a").count() == 0  # and no link anywhere in a chart
