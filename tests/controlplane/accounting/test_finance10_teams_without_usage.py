"""The team report lists every team it may read, one that used nothing at $0.00 (finance review, 7 Dec).

A team with no quota that ran nothing in the window was missing from the team report: finance,
told the page shows "every team", could not tell a team that cost nothing from one the report
left out, and its member read "No cost recorded in this window" rather than their team's $0.00.
Now the team grouping has a row for every team the reader may read (finance and admins: all;
a member: their own), zeros where nothing was used; other groupings list what was used only.

Real rollups on PostgreSQL: the small fleet's ml and vision (quotas of 16 H100 each), ml holding
one H100 for an hour, and a team `research` with no quota and no job.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from controlplane.services import accounting
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job


def _ml_ran_and_research_did_nothing(fleet: Any) -> str:
    f.make_team("research")
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=1, started_at=start, priority_class=fleet.research)
    hold(job, [(fleet.nodes[1], 1)], start, start + timedelta(hours=1))
    accounting.catch_up(now)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{start + timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}"


def test_finances_team_csv_has_a_row_for_a_team_that_used_nothing(fleet: Any, clients: dict[str, Any]) -> None:
    window = _ml_ran_and_research_did_nothing(fleet)
    response = clients["finance"].get("/api/v1/showback/", {"window": window, "group_by": "team", "format": "csv"})
    rows = {r["team"]: r for r in csv.DictReader(io.StringIO(response.content.decode()))}
    assert list(rows) == ["ml", "research", "vision", "__idle__", "TOTAL"]
    research = rows["research"]
    assert (research["gpu_hours_allocated"], research["cost_usd"], research["useful_tokens"],
            research["idle_reserved_usd"], research["row_kind"]) == ("0.0000", "0.00", "0", "0.00", "group")
    assert research["usd_per_gpu_hour"] == ""  # no GPU-hour: no price per GPU-hour, not $0


def test_the_json_lists_it_too_but_other_groupings_list_only_what_was_used(fleet: Any, clients: dict[str, Any]) -> None:
    window = _ml_ran_and_research_did_nothing(fleet)
    teams = clients["finance"].get("/api/v1/showback/", {"window": window, "group_by": "team"}).json()
    assert teams["data"][0]["research"]["totalCost"] == 0.0
    projects = clients["finance"].get("/api/v1/showback/", {"window": window, "group_by": "project"}).json()
    assert not any(key.startswith("research/") for key in projects["data"][0])


def test_a_member_of_a_team_that_used_nothing_reads_its_row_at_zero(fleet: Any) -> None:
    window = _ml_ran_and_research_did_nothing(fleet)
    member = f.make_user("rita", team=fleet.ml.__class__.objects.get(name="research"))
    client = Client()
    client.force_login(member)
    response = client.get("/showback/", {"window": window})
    rows = {r["name"]: r for r in response.context["rows"]}
    assert set(rows) == {"research", "TOTAL"}
    assert rows["research"]["cost_usd"] == 0
    assert 'id="no-rows"' not in response.content.decode()
