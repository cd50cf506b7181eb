"""Each of the three utilization tiers stays visible where it equals the next one down.

Demo walk, 7 Dec: the overview's and the node page's "Utilization in three tiers" drew three
lines of one width, productive last, so wherever the jobs kept all their active time (most of a
healthy fleet's minutes: active 69.5 %, productive 69.44 %) the orange *active* line lay wholly
under the green one: a tier in the legend with no line on the chart, read as missing. Each tier
is now drawn wider than the one drawn over it, so where two are equal the higher shows as a rim."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from frontend import figures

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
POINTS = [{"at": T0, "until": T0 + timedelta(minutes=1), "allocated": 0.9, "active": 0.7, "productive": 0.7}]


def _widths(chart: figures.Chart) -> dict[str, float]:
    return {t["name"]: float(t["line"].get("width", 2)) for t in chart.figure["data"]}


def test_each_tier_is_drawn_wider_than_the_one_over_it() -> None:
    for chart in (figures.utilization_tiers(POINTS), figures.node_utilization_tiers(POINTS, "h100-01")):
        widths = _widths(chart)
        # drawn in this order, each over the one before: a rim of at least 1 px shows on each side
        assert list(widths) == ["allocated", "active", "productive"]
        assert widths["allocated"] >= widths["active"] + 2 and widths["active"] >= widths["productive"] + 2, widths


def test_the_caption_says_how_two_equal_tiers_show() -> None:
    caption = figures.utilization_tiers(POINTS).caption
    assert "Where two tiers are equal, the higher one shows as a rim around the lower." in caption
