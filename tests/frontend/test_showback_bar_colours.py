"""/showback/'s "Cost per hour/day" chart draws each team in the team's own colour, as every page
does (moved from test_showback_cost_chart.py, whose tests share one hundred hours of use)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.services import accounting
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def test_each_teams_bars_are_in_the_teams_own_colour(client_for, submit_as):
    """Every page draws a team in one colour (figures.team_colour of its id); the showback's bars
    were coloured by their rank among the teams this chart happened to show."""
    from controlplane.models import Team
    from frontend import figures

    now = timezone.now()
    submit_as("alice", name="v", gpus=8, gpu_types=("H100-80GB",))
    submit_as("bob", name="l", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test", now=now - timedelta(hours=2))
    accounting.catch_up(now)
    chart = next(c for c in client_for("finn").get("/showback/", {"window": "24h"}).context["charts"]
                 if c.key == "cost_over_time")
    colours = {t["name"]: t["marker"]["color"] for t in chart.figure["data"]}
    assert colours == {name: figures.team_colour(Team.objects.get(name=name).pk) for name in ("language", "vision")}
