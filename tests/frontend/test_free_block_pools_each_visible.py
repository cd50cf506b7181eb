"""The overview's "Largest free block per pool" keeps every pool's line visible where two pools
read the same: its lines were all solid and of one width, so while both pools had a free node
(8 and 8, the demo's first minutes) or none (0 and 0, a full fleet) the a100 line lay wholly
under the h100 one drawn after it: a pool in the legend with no line on the chart (demo walk,
7 Dec). Each pool after the first is now dashed, in a pattern of its own, so a line drawn over
another lets it show through its gaps."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from frontend import figures

T0 = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


def _samples(blocks: dict[str, int]) -> list[dict[str, object]]:
    return [{"at": T0 + timedelta(seconds=6 * i), "largest_free_block_by_pool": blocks} for i in range(3)]


def test_pools_that_read_the_same_are_drawn_in_different_dashes() -> None:
    chart = figures.largest_free_block(_samples({"a100": 8, "h100": 8, "l40s": 8}))
    lines = [(t["name"], t["line"].get("dash", "solid")) for t in chart.figure["data"]]
    assert [name for name, _ in lines] == ["a100", "h100", "l40s"]
    assert lines[0][1] == "solid" and len({dash for _, dash in lines}) == 3, lines


def test_a_pool_the_fleet_has_but_no_sample_names_keeps_its_dash_by_name_order() -> None:
    # the dash follows the pool's place among the chart's pools, the colours' order too
    chart = figures.largest_free_block(_samples({"h100": 8}), ["a100", "h100"])
    assert [(t["name"], t["line"].get("dash", "solid")) for t in chart.figure["data"]][0] == ("a100", "solid")
    assert chart.figure["data"][1]["line"]["dash"] != "solid"
