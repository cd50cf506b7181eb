"""In Chromium, on a 1,400 px desktop: the overview's tiles stand in one row, and the GPUs tile's
figure keeps to one line (a worded figure, "nobody waits", may take two).

Found walking through the demo as an operator (5 Dec): "GPUs allocated 122 / 128 in service"
wrapped, "in service" on a line of its own in the figure's large bold type, and the eighth tile
sat alone on a second row."""

from __future__ import annotations

from typing import Any

import pytest

from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TILES = """() => [...document.querySelectorAll('.tiles .tile')].map(tile => {
  const value = tile.querySelector('.value');
  return {label: tile.querySelector('.label').textContent.trim(), top: tile.getBoundingClientRect().top,
          lines: Math.round(value.getBoundingClientRect().height / parseFloat(getComputedStyle(value).lineHeight))};
})"""


def test_the_overview_tiles_stand_in_one_row_with_one_line_figures(session: Any) -> None:  # noqa: F811
    operator = session("admin")
    operator.open("/")
    tiles = operator.page.evaluate(TILES)
    operator.screenshot("overview-tiles")

    assert len(tiles) == 8
    assert len({round(t["top"]) for t in tiles}) == 1, tiles
    assert tiles[0]["label"] == "GPUs allocated / in service" and tiles[0]["lines"] == 1, tiles[0]
