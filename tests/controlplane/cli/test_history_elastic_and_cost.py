"""The history of an elastic job says the GPUs it ran on, and `qm history` says what each job
cost and what they all did, in every channel alike (demo walk, 5 Dec).

An elastic job asking 4 GPUs (`min_gpus` 2, `max_gpus` 8) that ran on 8 for 3 minutes held 0.40
GPU-hours; the history page, its CSV, `qm history` and the API said "4" GPUs beside those 0.40
GPU-hours ("4 GPUs × 3 min" cannot be 0.40 GPU-h). They now say the GPUs its latest run held
(the run Elapsed measures), with what it asked beside it where that differs. And `qm history`
had no cost column and no total cost, though the page and the CSV have both: it now says the
CSV's very figures."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node
from controlplane.services import accounting
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow
_generation = iter(range(1, 10_000))


def _held(job: Job, node: Node, start: datetime, end: datetime, gpus: int) -> None:
    allocation = Allocation.objects.create(job=job, generation=next(_generation), epoch=1, created_at=start,
                                           started_at=start, released_at=end, state=AllocationState.RELEASED)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i, live=False)
                                      for i in range(gpus))


@pytest.fixture
def elastic_day(fleet: Any) -> dict[str, Any]:
    """Yesterday: an elastic job asking 4 that ran on 8 for 3 minutes (0.40 GPU-hours), a plain
    2-GPU job of 30 minutes (1 GPU-hour), a job cancelled while it waited; the accounting rolled."""
    now = timezone.now().astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    alice = fleet.users["owner"]
    t1 = day + timedelta(hours=9)
    elastic = f.make_job(fleet.ml, name="elastic", gpus=4, min_gpus=2, max_gpus=8, submitter=alice,
                         state=JobState.SUCCEEDED, exit_code=0, started_at=t1, finished_at=t1 + timedelta(minutes=3),
                         submitted_at=t1)
    _held(elastic, fleet.nodes[1], t1, t1 + timedelta(minutes=3), 8)
    t2 = day + timedelta(hours=12)
    plain = f.make_job(fleet.ml, name="plain", gpus=2, submitter=alice, state=JobState.SUCCEEDED, exit_code=0,
                       started_at=t2, finished_at=t2 + timedelta(minutes=30), submitted_at=t2)
    _held(plain, fleet.nodes[2], t2, t2 + timedelta(minutes=30), 2)
    waited = f.make_job(fleet.ml, name="never-ran", gpus=4, submitter=alice, state=JobState.CANCELLED,
                        finished_at=day + timedelta(hours=20), submitted_at=day + timedelta(hours=19))
    accounting.catch_up(day + timedelta(days=1))
    return {"day": day, "elastic": elastic, "plain": plain, "waited": waited}


def _window(day: datetime) -> list[str]:
    return ["--since", f"{day:%Y-%m-%d}", "--until", f"{day + timedelta(days=1):%Y-%m-%d}"]


def _params(day: datetime) -> dict[str, str]:
    return {"finished_after": day.isoformat(), "finished_before": (day + timedelta(days=1)).isoformat()}


def _csv(user: Any, params: dict[str, str]) -> list[dict[str, str]]:
    response = Client().get("/api/v1/jobs/history.csv", params, HTTP_AUTHORIZATION=f"Token {f.token_for(user)}")
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def _table(out: str) -> dict[str, list[str]]:
    lines = out.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "TEAM", "USER", "STATE", "EXIT", "START", "(UTC)", "ELAPSED", "GPUS",
                                "GPU-H", "LOST-GPU-H", "COST", "$", "NODES"], out
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[1:] if re.match(r"^\s*\d+\s{2,}", line)]
    return {row[1]: row for row in rows}


def test_an_elastic_jobs_history_says_the_gpus_its_run_held_in_every_channel(alice_qm, elastic_day, fleet) -> None:
    day, elastic = elastic_day["day"], elastic_day["elastic"]
    alice = fleet.users["owner"]

    api = Client().get(f"/api/v1/jobs/{elastic.pk}/", HTTP_AUTHORIZATION=f"Token {f.token_for(alice)}").json()
    assert (api["gpus"], api["last_run_gpus"], api["gpu_hours"]) == (4, 8, 0.4)
    listed = {j["name"]: j for j in alice_qm("history", *_window(day), "--format", "json").json()["jobs"]}
    assert [listed[n]["last_run_gpus"] for n in ("elastic", "plain", "never-ran")] == [8, 2, None]

    rows = {row["name"]: row for row in _csv(alice, _params(day))}
    assert (rows["elastic"]["gpus"], rows["elastic"]["last_run_gpus"], rows["elastic"]["gpu_hours"]) == ("4", "8", "0.4000")
    assert (rows["plain"]["gpus"], rows["plain"]["last_run_gpus"]) == ("2", "2")
    assert (rows["never-ran"]["gpus"], rows["never-ran"]["last_run_gpus"]) == ("4", "")

    table = alice_qm("history", *_window(day))
    assert table.code == 0, table.err
    cells = _table(table.out)
    assert cells["elastic"][8:10] == ["8 (asked 4)", "0.40"]
    assert cells["plain"][8:10] == ["2", "1.00"]

    page = Client()
    page.force_login(alice)
    html = page.get("/history/", _params(day)).content.decode()
    assert '<td data-value="8">8 (asked 4)</td>' in html
    assert '<td data-value="2">2</td>' in html
    assert '<td data-value="">–</td>' in html  # never ran: held none (it said the 4 it asked)


def test_qm_history_says_each_jobs_cost_and_the_total_as_the_page_and_csv_do(alice_qm, elastic_day, fleet) -> None:
    day = elastic_day["day"]
    alice = fleet.users["owner"]
    rows = _csv(alice, _params(day))
    costs = {row["name"]: row["cost_usd"] for row in rows if row["job_id"] != "TOTAL"}
    total = next(row["cost_usd"] for row in rows if row["job_id"] == "TOTAL")
    assert Decimal(costs["plain"]) > 0 and Decimal(total) == sum(Decimal(c) for c in costs.values())

    run = alice_qm("history", *_window(day))
    assert run.code == 0, run.err
    cells = _table(run.out)
    assert {name: row[-2] for name, row in cells.items()} == costs
    assert run.out.strip().splitlines()[-1].endswith(f"; cost ${Decimal(total):,.2f}.")

    page = Client()
    page.force_login(alice)
    html = page.get("/history/", _params(day)).content.decode()
    assert f'data-cost-usd="{total}"' in html

    as_json = alice_qm("history", *_window(day), "--format", "json").json()
    assert as_json["totals"]["cost_usd"] == total
