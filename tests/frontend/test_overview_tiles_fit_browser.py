"""In Chromium, on a 1,400 px desktop: the overview's tiles stand in one row, and the GPUs tile's
figure keeps to one line (a worded figure, "nobody waits", may take two).

Found walking through the demo as an operator (5 Dec): "GPUs allocated 122 / 128 in service"
wrapped, "in service" on a line of its own in the figure's large bold type, and the eighth tile
sat alone on a second row."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import Node
from controlplane.services.jobs import SubmitRequest, submit
from tests.controlplane.job_runs_story import bind_at
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

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


def test_the_gpus_tile_keeps_its_figure_on_one_line_at_1000_px(session: Any) -> None:  # noqa: F811
    """At 1,000 px the tiles stand in two rows, six a row, and "128 / 128" wrapped after its "/",
    the figure on two lines of the large bold type (demo walk, 5 Dec, a full fleet)."""
    for pool in ("a100", "h100"):  # a gang does not mix GPU types: one a pool
        nodes = list(Node.objects.filter(state="ready", pool=pool).order_by("name"))
        gang = submit(user("alice"), SubmitRequest(name=f"all-{pool}", gpus=8 * len(nodes), gpus_per_node=8)).job
        bind_at(gang, [(node, range(8), "") for node in nodes], at=timezone.now() - timedelta(minutes=5))

    operator = session("admin")
    operator.page.set_viewport_size({"width": 1000, "height": 900})
    operator.open("/")
    tiles = operator.page.evaluate(TILES)
    operator.screenshot("overview-tiles-1000")

    figure = operator.page.locator(".tiles .tile .value").first.inner_text()
    assert figure.replace(" ", "") == "128/128", figure
    assert tiles[0]["lines"] == 1, tiles[0]
    fits = operator.page.evaluate("""() => { const tile = document.querySelector('.tiles .tile');
      const value = tile.querySelector('.value'); const style = getComputedStyle(tile);
      return value.getBoundingClientRect().right <= tile.getBoundingClientRect().right - parseFloat(style.paddingRight) + 0.5; }""")
    assert fits, "the figure stays inside its tile"
