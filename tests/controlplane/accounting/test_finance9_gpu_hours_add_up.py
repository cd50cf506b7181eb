"""Showback's GPU-hour columns add up to their TOTAL row, as its cents do (finance review, 7 Dec).

Each row was rounded on its own: the page read language 4.2 + vision 3.0 above a TOTAL of 7.3,
and the CSV's rows, to four places, could be 0.0001 off its TOTAL. Now each column is rounded
cumulatively over the rows (`run_text.rounded_cumulatively`, the rule of a job's runs): the page
to two places ("< 0.01" for a non-zero share rounded to none), the CSV to four. The API's JSON
keeps each row's own figure to four places (docs/accounting.md, *Reconciliation and rounding*).

Real rollups on PostgreSQL: ml and vision each held one GPU for 3,618.18 s, 1.00505 GPU-hours,
which rounds to 1.0050 (and 1.01) on its own while the two make 2.0101 (2.01).
"""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.test import Client
from django.utils import timezone

from controlplane.services import accounting
from tests.controlplane.accounting.builders import both_teams_held_one_gpu, hold, running_job


def _csv(clients: dict[str, Any], window: str, group_by: str = "team") -> list[dict[str, str]]:
    response = clients["finance"].get("/api/v1/showback/", {"window": window, "group_by": group_by, "format": "csv"})
    assert response.status_code == 200, response.content
    return list(csv.DictReader(io.StringIO(response.content.decode())))


HOUR_COLUMNS = ("gpu_hours_allocated", "gpu_hours_active", "gpu_hours_productive", "preemption_lost_gpu_hours",
                "gpu_hours_idle")


def test_the_csvs_gpu_hour_columns_add_up_to_total(fleet: Any, clients: dict[str, Any]) -> None:
    window = both_teams_held_one_gpu(fleet)
    rows = _csv(clients, window)
    by_name = {r["team"]: r for r in rows}
    assert by_name["TOTAL"]["gpu_hours_allocated"] == "2.0101"
    assert {by_name["ml"]["gpu_hours_allocated"], by_name["vision"]["gpu_hours_allocated"]} == {"1.0050", "1.0051"}
    for column in HOUR_COLUMNS:
        cells = [Decimal(r[column]) for r in rows if r["team"] != "TOTAL" and r[column] != ""]
        assert sum(cells, Decimal(0)) == Decimal(by_name["TOTAL"][column]), column
        # still four places, as finance's spreadsheets read them
        assert all(re.fullmatch(r"\d+\.\d{4}", r[column]) for r in rows if r[column] != ""), column


def test_the_json_keeps_each_rows_own_figure(fleet: Any, clients: dict[str, Any]) -> None:
    window = both_teams_held_one_gpu(fleet)
    report = clients["finance"].get("/api/v1/showback/", {"window": window, "group_by": "team"}).json()
    data = report["data"][0]
    assert data["ml"]["gpuHours"] == data["vision"]["gpuHours"] == 1.005  # 1.00505 to four places, half to even
    assert report["totals"]["gpuHours"] == 2.0101


def _page_cells(html: str) -> dict[str, str]:
    """Each row's "GPU-h allocated" cell of the /showback/ table, by the row's heading."""
    table = html[html.index('id="showback-table"'):html.index("</table>")]
    rows = re.findall(r'<th scope="row">([^<]*)</th>\s*<td>([^<]*)</td>', table)
    return {name.strip(): cell.strip() for name, cell in rows}


def test_the_pages_gpu_hours_add_up_to_total_in_two_places(fleet: Any) -> None:
    window = both_teams_held_one_gpu(fleet)
    client = Client()
    client.force_login(fleet.users["finance"])
    response = client.get("/showback/", {"window": window})
    assert response.status_code == 200
    cells = _page_cells(response.content.decode())
    assert cells["TOTAL"] == "2.01"
    assert sorted([cells["ml"], cells["vision"]]) == ["1.00", "1.01"], cells
    assert cells["no job (idle capacity)"].endswith(" idle")


def test_a_small_non_zero_share_reads_less_than_a_hundredth(fleet: Any) -> None:
    """A team that held a GPU for 20 s (0.0056 GPU-hours) beside one that held it for 3,618.18 s:
    cumulatively its share can round to none, and the page says it "< 0.01", never 0."""
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    big = running_job(fleet.ml, gpus=1, started_at=start, priority_class=fleet.research)
    hold(big, [(fleet.nodes[1], 1)], start, start + timedelta(seconds=3600 + 27))  # 1.0075: ml first, cost down
    small = running_job(fleet.vision, gpus=1, started_at=start, priority_class=fleet.research)
    hold(small, [(fleet.nodes[2], 1)], start, start + timedelta(seconds=5))  # 0.0014
    accounting.catch_up(now)
    client = Client()
    client.force_login(fleet.users["finance"])
    end = start + timedelta(hours=2)
    cells = _page_cells(client.get("/showback/", {"window": f"{start:%Y-%m-%dT%H:%M:%SZ},{end:%Y-%m-%dT%H:%M:%SZ}"})
                        .content.decode())
    assert cells["ml"] == "1.01" and cells["TOTAL"] == "1.01", cells
    assert cells["vision"] == "&lt; 0.01", cells
