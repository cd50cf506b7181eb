"""The queue's priority classes in colours a colour-blind reader tells apart, each its own.

The queue depth chart stacks its classes as filled areas, so colour alone tells them apart there
(the pools' lines have their dashes, the tiers their widths). Until 8 Dec its traces had no
colour of their own: Plotly's default cycle gave the demo's four classes blue, orange, green and
red (#2ca02c beside #d62728, which deuteranopes see alike), and by the order of the classes that
had a job in the window, so research was orange while production waited and blue once none did.
Each class now takes the colour-blind-safe palette's colour of its place in the fleet's priority
order (`figures.class_colours`): the same whichever classes wait."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from frontend import figures

T0 = datetime(2026, 12, 8, 9, 0, tzinfo=UTC)
ORDER = ["production", "research", "batch", "best-effort"]


def _colours(pending: list[dict[str, int]], team: str | None = None) -> dict[str, str]:
    samples = [{"at": T0 + timedelta(minutes=i), "pending_by_priority": p, "pending_by_team": {},
                "pending_by_team_priority": {"vision": p}} for i, p in enumerate(pending)]
    return {t["name"]: t["line"].get("color") for t in figures.queue_depth(samples, ORDER, team).figure["data"]}


def test_each_class_is_drawn_in_its_own_colour_blind_safe_colour() -> None:
    colours = _colours([{"production": 1, "research": 2, "batch": 3, "best-effort": 4}])
    assert list(colours) == ORDER
    # The Okabe-Ito colours, by the classes' place in the priority order: never Plotly's red
    # beside its green.
    assert colours == dict(zip(ORDER, figures.TEAM_PALETTE[:4], strict=True))


def test_a_class_keeps_its_colour_whichever_other_classes_wait() -> None:
    everyone = _colours([{"production": 1, "research": 2, "batch": 3}])
    research_alone = _colours([{"research": 2}])
    assert research_alone["research"] == everyone["research"] is not None
    # One team's queue colours its classes as the fleet's does.
    assert _colours([{"batch": 1}], team="vision")["batch"] == everyone["batch"]


def test_a_class_outside_the_fleets_order_still_has_a_colour_of_its_own() -> None:
    colours = _colours([{"research": 1, "gone-class": 2}])
    assert colours["gone-class"] in figures.TEAM_PALETTE
    assert colours["gone-class"] != colours["research"]
