"""In Chromium: the overview's heat map keeps its cells where they are when its colour bar gains
or loses a category. The bar's room was its labels' width: a node cordoned (its idle GPUs grey,
"away" in the bar) narrowed every cell at the next live update, and its uncordon
widened them again (54 px of 1,068 at 1,400 px, seen on the demo 7 Dec): the map jumped at each
change of the fleet's state. The bar has room for every category it can show, always."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from controlplane.models import Node
from controlplane.services import nodes
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: The slot axis's length and the colour bar's labels at every change to the heat map's drawing
#: from now on (a MutationObserver's callback runs between plotly's drawing and any relayout).
WATCH = """() => {
    const plot = document.querySelector('[data-chart="heatmap"] .js-plotly-plot');
    window.__heatmapDrawn = [];
    new MutationObserver(() => window.__heatmapDrawn.push(Math.round(plot._fullLayout.xaxis._length)))
        .observe(plot, {childList: true, subtree: true, attributes: true});
}"""
DRAWN = """() => { const plot = document.querySelector('[data-chart="heatmap"] .js-plotly-plot');
    return {length: Math.round(plot._fullLayout.xaxis._length), words: plot.data[0].colorbar.ticktext}; }"""


def _update(page: Any) -> None:
    updates = int(page.evaluate("() => Number(document.body.dataset.liveUpdates || '0')"))
    page.evaluate("() => QM.poll()")
    expect(page.locator("body")).to_have_attribute("data-live-updates", str(updates + 1))


@pytest.mark.parametrize("width", [1400, 600])
def test_a_cordon_and_an_uncordon_leave_the_heat_maps_cells_where_they_were(session: Any, width: int) -> None:  # noqa: F811
    admin = session("admin")
    admin.page.set_viewport_size({"width": width, "height": 900})
    admin.open("/")
    page = admin.page
    page.evaluate("() => QM.stop()")  # the test's polls are the only ones
    before = page.evaluate(DRAWN)
    assert "away" not in before["words"]
    page.evaluate(WATCH)

    node = Node.objects.get(name="h100-12")
    nodes.cordon(node, User.objects.get(username="admin"))
    _update(page)
    cordoned = page.evaluate(DRAWN)
    assert "away" in cordoned["words"]
    nodes.uncordon(Node.objects.get(name="h100-12"), User.objects.get(username="admin"))
    _update(page)

    drawn = page.evaluate("() => window.__heatmapDrawn")
    assert drawn and set(drawn) == {before["length"]}, (before, cordoned, drawn)
