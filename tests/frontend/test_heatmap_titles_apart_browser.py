"""In Chromium, on a phone's width: a heat map's title stays clear of its GPU-slot axis title.

The heat maps put their slot axis on top, so its title ("GPU slot (index on the node)") sits in
the top margin with the chart's own; at 1400 px they are far apart, but at 390 px the centred axis
title was drawn across the left-aligned chart title ("Fleet heat map", "GPUs of a100-02"),
unreadable on the overview and every node page (seen 7 Dec)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: Each chart's title box and its x-axis title's box, as Chromium lays them out.
TITLE_BOXES = """key => {
    const plot = document.querySelector(`[data-chart="${key}"] .js-plotly-plot`);
    const box = selector => {
        const r = plot.querySelector(selector).getBoundingClientRect();
        return {left: r.left, top: r.top, right: r.right, bottom: r.bottom};
    };
    return {title: box('.gtitle'), axis: box('.xtitle')};
}"""


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.mark.parametrize("width", [390, 1400])
@pytest.mark.parametrize(("path", "key"), [("/", "heatmap"), ("/nodes/a100-02/", "placement")])
def test_heat_map_title_and_slot_axis_title_do_not_overlap(session: Any, path: str, key: str, width: int) -> None:  # noqa: F811
    admin = session("admin")
    admin.page.set_viewport_size({"width": width, "height": 900})
    admin.open(path)
    boxes = admin.page.evaluate(TITLE_BOXES, key)
    assert boxes["title"]["bottom"] > boxes["title"]["top"] and boxes["axis"]["bottom"] > boxes["axis"]["top"]
    assert not _overlap(boxes["title"], boxes["axis"]), f"{path} at {width} px: {boxes}"
    # Both inside the chart's box, neither cut off at its top.
    frame = admin.page.locator(f'[data-chart="{key}"] .js-plotly-plot').bounding_box()
    assert frame is not None and boxes["title"]["top"] >= frame["y"] and boxes["axis"]["top"] >= frame["y"]
