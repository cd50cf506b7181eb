"""Showback says each team's borrowed GPU-hours: its use beyond its guarantee (finance review, 7 Dec).

The accounting split every minute of a team's use into within its guarantee and borrowed
(`QuotaRollup.borrowed_gpu_seconds`, the same split the teams page and the idle reserved quota
read), and docs/operations.md said showback counted borrowed GPU-hours, but no view of showback
showed them: finance could not tell who ran on capacity other teams lent. Now the team report
carries them, rounded cumulatively like every GPU-hour column so the teams add up to TOTAL: the
page (beside the allocated GPU-hours), the CSV (`gpu_hours_borrowed`) and the JSON
(`borrowedGpuHours`, and in `shown`). A guarantee is a team's, so other groupings leave it
out, as they leave out idle reserved quota.

Real rollups on PostgreSQL: ml (16 H100 guaranteed) holds 24 H100 for one hour beside vision
(16 guaranteed, idle): 8 GPU-hours borrowed, lent by vision.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from controlplane.services import accounting
from tests.controlplane.accounting.builders import hold, running_job


def _ml_borrowed_eight_gpu_hours(fleet: Any) -> str:
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=24, started_at=start, priority_class=fleet.research, borrowed=True)
    hold(job, [(fleet.nodes[1], 8), (fleet.nodes[2], 8), (fleet.nodes[3], 8)], start, start + timedelta(hours=1),
         borrowed=True)
    accounting.catch_up(now)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{start + timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}"


def _csv(clients: dict[str, Any], window: str, group_by: str) -> dict[str, dict[str, str]]:
    response = clients["finance"].get("/api/v1/showback/", {"window": window, "group_by": group_by, "format": "csv"})
    assert response.status_code == 200, response.content
    return {r[group_by]: r for r in csv.DictReader(io.StringIO(response.content.decode()))}


def test_the_team_csv_says_each_teams_borrowed_gpu_hours_adding_up_to_total(fleet: Any, clients: dict[str, Any]) -> None:
    rows = _csv(clients, _ml_borrowed_eight_gpu_hours(fleet), "team")
    assert rows["ml"]["gpu_hours_allocated"] == "24.0000"
    assert rows["ml"]["gpu_hours_borrowed"] == "8.0000"
    assert rows["vision"]["gpu_hours_borrowed"] == "0.0000"
    assert rows["TOTAL"]["gpu_hours_borrowed"] == "8.0000"
    assert rows["__idle__"]["gpu_hours_borrowed"] == ""   # capacity no job held borrows nothing


def test_other_groupings_leave_borrowed_out_as_they_leave_out_idle_reserved(fleet: Any,
                                                                           clients: dict[str, Any]) -> None:
    window = _ml_borrowed_eight_gpu_hours(fleet)
    for group_by in ("project", "priority_class", "job"):
        rows = _csv(clients, window, group_by)
        assert {r["gpu_hours_borrowed"] for r in rows.values()} == {""}, group_by
        report = clients["finance"].get("/api/v1/showback/", {"window": window, "group_by": group_by}).json()
        assert report["totals"]["borrowedGpuHours"] is None, group_by


def test_the_json_gives_borrowed_gpu_hours_and_their_shown_figure(fleet: Any, clients: dict[str, Any]) -> None:
    window = _ml_borrowed_eight_gpu_hours(fleet)
    report = clients["finance"].get("/api/v1/showback/", {"window": window, "group_by": "team"}).json()
    ml = report["data"][0]["ml"]
    assert ml["borrowedGpuHours"] == 8.0 and ml["shown"]["borrowedGpuHours"] == 8.0
    assert report["data"][0]["vision"]["borrowedGpuHours"] == 0.0
    assert report["totals"]["borrowedGpuHours"] == 8.0 and report["totals"]["shown"]["borrowedGpuHours"] == 8.0


def test_the_page_says_a_teams_borrowed_gpu_hours(fleet: Any) -> None:
    window = _ml_borrowed_eight_gpu_hours(fleet)
    client = Client()
    client.force_login(fleet.users["finance"])
    response = client.get("/showback/", {"window": window})
    rows = {r["name"]: r for r in response.context["rows"]}
    assert rows["ml"]["hours_shown"]["borrowed"] == 8
    html = response.content.decode()
    table = html[html.index('id="showback-table"'):html.index("</table>")]
    assert "8.00 borrowed" in table
    # a team that borrowed nothing says nothing of it
    assert table.count(" borrowed<") == 2  # ml's row and TOTAL's
