"""GET /api/v1/showback/ and /api/v1/metrics/utilization/: shape, roles, CSV, errors.

The shared fleet (tests/controlplane/fleet_fixture.py): H100 on-demand at $2.50/GPU-h; team ml
(alice) and team vision (bob). Usage is placed in the two hours before the real clock's now,
since the API reads the clock at the edge.
"""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import Node
from controlplane.services import accounting
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, report, running_job
from tests.controlplane.fleet_fixture import Fleet

SHOWBACK = "/api/v1/showback/"
UTILIZATION = "/api/v1/metrics/utilization/"


@pytest.fixture
def usage(fleet: Fleet) -> dict[str, Any]:
    """ml: 8 GPUs for 1 h (project llm) = $20.00; vision: 4 GPUs for 30 min = $5.00."""
    now = timezone.now().replace(microsecond=0)
    # Half past an hour, 1.5 to 2.5 h ago: the accounting begins mid-hour whatever the time now
    # (two hours before hh:00:40 began at a whole hour, and the first hour's bucket was whole).
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=1, minutes=30)
    ml_job = running_job(fleet.ml, gpus=8, started_at=start, project=fleet.llm, priority_class=fleet.research)
    a = hold(ml_job, [(fleet.nodes[1], 8)], start, start + timedelta(hours=1))
    report(a, fleet.nodes[1], start, start + timedelta(hours=1), tokens_per_s=1000)
    vision_job = running_job(fleet.vision, gpus=4, started_at=start, priority_class=fleet.production)
    hold(vision_job, [(fleet.nodes[2], 4)], start, start + timedelta(minutes=30))
    accounting.catch_up(now)
    return {"ml_job": ml_job, "vision_job": vision_job, "start": start, "now": now}


def allocations(response: Any) -> dict[str, Any]:
    body = response.json()
    assert body["code"] == 200
    return body["data"][0]


@pytest.mark.parametrize("role", ["finance", "admin"])
def test_finance_and_admins_read_every_team_and_the_idle_capacity(clients: dict[str, APIClient], usage: Any,
                                                                  role: str) -> None:
    response = clients[role].get(SHOWBACK, {"window": "1d", "group_by": "team"})
    assert response.status_code == 200
    sets = allocations(response)
    assert set(sets) == {"ml", "vision", "__idle__"}
    assert sets["ml"]["gpuCost"] == 20.0 and sets["ml"]["gpuHours"] == 8.0
    assert sets["vision"]["totalCost"] == 5.0
    assert sets["ml"]["usefulTokens"] == 3_600_000
    total = response.json()["totals"]
    assert Decimal(str(sum(a["totalCost"] for a in sets.values()))).quantize(Decimal("0.01")) == Decimal(
        str(total["totalCost"])).quantize(Decimal("0.01"))


def test_a_member_reads_only_their_own_team(clients: dict[str, APIClient], usage: Any) -> None:
    sets = allocations(clients["owner"].get(SHOWBACK, {"window": "1d"}))
    assert set(sets) == {"ml"}
    sets = allocations(clients["other_team"].get(SHOWBACK, {"window": "1d", "group_by": "job"}))
    assert [a["properties"]["team"] for a in sets.values()] == ["vision"]


@pytest.mark.parametrize("role, status", [("anonymous", 401), ("agent", 401)])
def test_agents_and_anonymous_callers_are_refused(clients: dict[str, APIClient], usage: Any, role: str,
                                                  status: int) -> None:
    assert clients[role].get(SHOWBACK).status_code == status
    assert clients[role].get(UTILIZATION).status_code == status


def test_a_user_with_no_team_and_no_role_is_refused(fleet: Fleet) -> None:
    loner = f.make_user("loner")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(loner)}")
    assert client.get(SHOWBACK).status_code == 403


def test_csv_has_the_exact_columns_and_a_total_row_that_adds_up(clients: dict[str, APIClient], usage: Any) -> None:
    response = clients["finance"].get(SHOWBACK, {"window": "1d", "format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0][:9] == ["team", "gpu_hours_allocated", "gpu_hours_active", "gpu_hours_productive", "cost_usd",
                           "usd_per_gpu_hour", "usd_per_useful_token", "idle_reserved_usd", "preemption_waste_usd"]
    assert rows[0][9:] == ["usd_per_productive_gpu_hour", "useful_tokens", "usd_per_million_tokens",
                           "preemption_lost_gpu_hours", "gpu_hours_idle", "cost_without_tokens_usd",
                           "share_of_cost_without_tokens", "gpu_hours_borrowed", "period_start", "period_end",
                           "row_kind"]
    window = clients["finance"].get(SHOWBACK, {"window": "1d"}).json()["window"]
    assert {tuple(r[-3:-1]) for r in rows[1:]} == {(window["start"], window["end"])}
    body, total = rows[1:-1], rows[-1]
    assert [r[0] for r in body] == ["ml", "vision", "__idle__"]
    assert total[0] == "TOTAL"
    for column in (4, 7, 8):
        assert sum(Decimal(r[column] or "0") for r in body) == Decimal(total[column])
    ml = body[0]
    assert ml[1:5] == ["8.0000", "6.0000", "6.0000", "20.00"]
    assert ml[5] == "2.5000"
    assert Decimal(ml[6]) == (Decimal(20) / Decimal(3_600_000)).quantize(Decimal("1e-12"))


@pytest.mark.parametrize("group_by, names", [
    ("project", {"ml/llm", "vision/__unallocated__"}),
    ("priority_class", {"research", "production"}),
])
def test_other_groupings(clients: dict[str, APIClient], usage: Any, group_by: str, names: set[str]) -> None:
    sets = allocations(clients["finance"].get(SHOWBACK, {"window": "1d", "group_by": group_by}))
    assert set(sets) - {"__idle__"} == names


def test_group_by_job_names_each_job(clients: dict[str, APIClient], usage: Any) -> None:
    sets = allocations(clients["admin"].get(SHOWBACK, {"window": "1d", "group_by": "job"}))
    entry = sets[str(usage["ml_job"].pk)]
    assert entry["properties"] == {"job_id": usage["ml_job"].pk, "job": usage["ml_job"].name, "team": "ml",
                                   "project": usage["ml_job"].project.name if usage["ml_job"].project else ""}


def test_month_is_the_monthly_report(clients: dict[str, APIClient], usage: Any) -> None:
    # last month, covered in full (a month still running is named by what it covered:
    # test_finance3_csv_filename_period.py)
    month = (usage["now"].replace(day=1) - timedelta(days=1)).strftime("%Y-%m")
    response = clients["finance"].get(SHOWBACK, {"month": month, "format": "csv"})
    assert response.status_code == 200
    assert f"showback-team-{month}.csv" in response["Content-Disposition"]
    assert response.content.decode().splitlines()[-1].startswith("TOTAL,")


@pytest.mark.parametrize("params, field", [
    ({"window": "seven days"}, "window"),
    ({"window": "0d"}, "window"),
    ({"window": "2026-11-08T00:00:00Z,2026-11-01T00:00:00Z"}, "window"),
    ({"group_by": "user"}, "group_by"),
    ({"month": "2026-13"}, "month"),
    ({"month": "11-2026"}, "month"),
    ({"month": "9999-12"}, "month"),
    ({"month": "0000-01"}, "month"),
    ({"window": "7d", "month": "2026-11"}, "month"),
    ({"format": "xml"}, "format"),
])
def test_bad_input_gets_a_400_naming_the_field(clients: dict[str, APIClient], fleet: Fleet, params: dict[str, str],
                                               field: str) -> None:
    response = clients["finance"].get(SHOWBACK, params)
    assert response.status_code == 400, response.content
    assert field in response.json()["errors"]


def test_showback_query_count_does_not_grow_with_the_rows(clients: dict[str, APIClient], usage: Any,
                                                          django_assert_max_num_queries: Any) -> None:
    with django_assert_max_num_queries(12):
        assert clients["finance"].get(SHOWBACK, {"window": "7d", "group_by": "job"}).status_code == 200


def test_utilization_series_has_the_three_tiers_ordered(clients: dict[str, APIClient], usage: Any) -> None:
    response = clients["owner"].get(UTILIZATION, {"window": "3h", "bucket": "minute"})
    assert response.status_code == 200
    points = response.json()["points"]
    busy = [p for p in points if p["allocatedGpus"] > 0]
    assert busy
    for p in points:
        assert p["capacityGpus"] >= p["allocatedGpus"] >= p["activeGpus"] >= p["productiveGpus"] >= 0
    assert max(p["allocatedGpus"] for p in points) == pytest.approx(12)
    # times as everywhere else in the API: UTC written "Z"
    window = response.json()["window"]
    assert all(t.endswith("Z") for t in (window["start"], window["end"], points[0]["t"]))


def test_the_first_bucket_of_history_averages_over_the_time_accounted(clients: dict[str, APIClient],
                                                                      usage: Any) -> None:
    """Found by QA: the first hour of a fresh fleet averaged its GPU-seconds over the whole hour,
    so capacityGpus read 87.5 of 128 GPUs in the demo's first hour (the accounting began
    mid-hour)."""
    fleet_gpus = sum(Node.objects.values_list("gpu_count", flat=True))
    points = clients["admin"].get(UTILIZATION, {"window": "3h", "bucket": "hour"}).json()["points"]

    assert points and all(p["capacityGpus"] == pytest.approx(fleet_gpus) for p in points)
    assert points[0]["seconds"] < 3600  # it began mid-hour
    assert all(p["capacityGpus"] >= p["allocatedGpus"] for p in points)


def test_utilization_of_a_team_needs_access_to_it(clients: dict[str, APIClient], usage: Any) -> None:
    assert clients["owner"].get(UTILIZATION, {"team": "ml"}).status_code == 200
    assert clients["owner"].get(UTILIZATION, {"team": "vision"}).status_code == 404
    response = clients["finance"].get(UTILIZATION, {"team": "vision", "window": "3h", "bucket": "hour"})
    assert response.status_code == 200
    assert response.json()["team"] == "vision"
    assert all(p["capacityGpus"] is None for p in response.json()["points"])


def test_utilization_refuses_a_million_points(clients: dict[str, APIClient], fleet: Fleet) -> None:
    response = clients["admin"].get(UTILIZATION, {"window": "52w", "bucket": "minute"})
    assert response.status_code == 400
    assert "bucket" in response.json()["errors"]
