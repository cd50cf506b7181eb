"""A team has one colour on every chart of every page, whichever other teams a chart shows."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import JobState
from controlplane.models import Job, Team
from controlplane.services.cycle import run_cycle
from frontend import figures

pytestmark = pytest.mark.django_db


def heat_map_colours(chart: Any) -> dict[str, str]:
    """Each category of a heat map's colour bar → its colour (category k owns [k/n, (k+1)/n])."""
    heat = chart.figure["data"][0]
    scale = heat["colorscale"]
    return {name: scale[2 * k][1] for k, name in enumerate(heat["colorbar"]["ticktext"])}


def test_a_team_keeps_its_colour_on_the_heat_map_the_placement_map_the_dominant_share_and_the_boxes(
    client_for, submit_as, samples,
):
    # vision and language hold GPUs (so only they are on the heat map); serving holds none but is
    # on the dominant share chart: ranking each chart's own teams gave vision two colours.
    vision = submit_as("alice", name="v", gpus=8)
    submit_as("bob", name="l", gpus=8)
    run_cycle("test")
    samples(5, dominant_share_by_team={"vision": 0.1, "language": 0.1, "serving": 0.0})
    admin = client_for("admin")
    overview = {c.key: c for c in admin.get("/").context["charts"].values()}
    teams = admin.get("/teams/").context["charts"]
    job = admin.get(f"/jobs/{vision.pk}/").context["charts"]
    assert Job.objects.get(pk=vision.pk).state == JobState.RUNNING

    expected = {t.name: figures.team_colour(t.pk) for t in Team.objects.all()}
    assert len(set(expected.values())) == len(expected)  # the demo's teams are told apart
    on_heat_map = heat_map_colours(overview["heatmap"])
    lines = {t["name"]: t["line"]["color"] for t in teams["dominant_share"].figure["data"]}
    boxes = {t["name"]: t["marker"]["color"] for t in teams["waits"].figure["data"] if t["type"] == "box"}
    for name in ("vision", "language"):
        assert on_heat_map[name] == lines[name] == boxes[name] == expected[name], name
    assert lines["serving"] == expected["serving"]
    # the job's own map: its slots are "this job"; another team sharing its nodes keeps its colour
    assert heat_map_colours(job["placement"]).get("language", expected["language"]) == expected["language"]


def test_cost_per_team_takes_the_teams_own_colours_when_given_their_ids():
    from datetime import datetime, timezone

    at = datetime(2026, 11, 29, tzinfo=timezone.utc)
    chart = figures.cost_over_time({"vision": [(at, 1.0)], "zeta": [(at, 2.0)]}, "team", "day", 86400,
                                   team_ids={"vision": 3, "zeta": 1})
    colours = {t["name"]: t["marker"]["color"] for t in chart.figure["data"]}
    assert colours == {"vision": figures.team_colour(3), "zeta": figures.team_colour(1)}
