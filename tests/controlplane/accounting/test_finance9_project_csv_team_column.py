"""The by-project showback CSV names each row's team and project in columns of their own, as the
job CSV does, so a spreadsheet can total by team (finance review, 7 Dec: it said `ml/llm` in one
cell). The first column keeps `ml/llm` (readers by position and by the heading `project` find it
where they did); the new columns, `team` and `project_name`, follow the figures.

Real rollups on PostgreSQL: ml ran a job in its project llm and one in no project; vision ran one
in no project.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from controlplane.services import accounting
from tests.controlplane.accounting.builders import hold, running_job


def _three_jobs_ran(fleet: Any) -> str:
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    for team, project, node, seconds in ((fleet.ml, fleet.llm, fleet.nodes[1], 3000),
                                         (fleet.ml, None, fleet.nodes[2], 1234),
                                         (fleet.vision, None, fleet.nodes[3], 2222)):
        job = running_job(team, gpus=2, started_at=start, priority_class=fleet.research, project=project)
        hold(job, [(node, 2)], start, start + timedelta(seconds=seconds))
    accounting.catch_up(now)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{start + timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}"


def _csv(clients: dict[str, Any], window: str, group_by: str) -> tuple[list[str], list[dict[str, str]]]:
    response = clients["finance"].get("/api/v1/showback/", {"window": window, "group_by": group_by, "format": "csv"})
    assert response.status_code == 200, response.content
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    return rows[0], [dict(zip(rows[0], r, strict=True)) for r in rows[1:]]


def test_the_project_csv_has_team_and_project_columns(fleet: Any, clients: dict[str, Any]) -> None:
    window = _three_jobs_ran(fleet)
    header, rows = _csv(clients, window, "project")
    assert header[0] == "project" and header[1] == "gpu_hours_allocated"  # as before, for readers by position
    assert header.count("project") == 1
    assert header[-5:] == ["team", "project_name", "period_start", "period_end", "row_kind"]
    named = {r["project"]: (r["team"], r["project_name"]) for r in rows}
    assert named == {"ml/llm": ("ml", "llm"), "ml/__unallocated__": ("ml", ""), "vision/__unallocated__": ("vision", ""),
                     "__idle__": ("", ""), "TOTAL": ("", "")}


def test_totalling_the_project_csv_by_team_gives_the_team_csv(fleet: Any, clients: dict[str, Any]) -> None:
    window = _three_jobs_ran(fleet)
    _, projects = _csv(clients, window, "project")
    _, teams = _csv(clients, window, "team")
    by_team: dict[str, Decimal] = {}
    for row in projects:
        if row["team"]:
            by_team[row["team"]] = by_team.get(row["team"], Decimal(0)) + Decimal(row["cost_usd"])
    assert by_team == {r["team"]: Decimal(r["cost_usd"]) for r in teams if r["team"] not in ("__idle__", "TOTAL")}
    assert by_team["ml"] > 0 and by_team["vision"] > 0
