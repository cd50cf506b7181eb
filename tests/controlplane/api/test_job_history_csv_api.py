"""`GET /api/v1/jobs/history.csv`: the ended jobs as CSV with a token, byte for byte the CSV of
the `/history/` page's Download link (one place writes it: services/job_history.history_csv),
scoped and filtered as the jobs list is, a bad filter a 400 naming it."""

from __future__ import annotations

import csv
import io
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, AllocationGpu
from controlplane.services import accounting, job_costs, job_history
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
URL = "/api/v1/jobs/history.csv"


def _body(response: Any) -> str:
    assert response.status_code == 200, response.content[:400] if not response.streaming else ""
    assert response["Content-Type"].startswith("text/csv")
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def ended(fleet: Any) -> dict[str, Any]:
    now = timezone.now().replace(second=0, microsecond=0)
    t0 = now - timedelta(hours=3)
    jobs = {
        "ok": f.make_job(fleet.ml, name="ok", gpus=2, state=JobState.SUCCEEDED, exit_code=0,
                         submitted_at=t0, started_at=t0, finished_at=t0 + timedelta(minutes=30)),
        "oom": f.make_job(fleet.ml, name="oom", gpus=1, state=JobState.FAILED, exit_code=137,
                          submitted_at=t0, started_at=t0 + timedelta(minutes=40), finished_at=t0 + timedelta(minutes=70)),
        "theirs": f.make_job(fleet.vision, name="theirs", state=JobState.SUCCEEDED, exit_code=0,
                             submitted_at=t0, started_at=t0, finished_at=t0 + timedelta(minutes=10)),
    }
    for i, (job, node, gpus) in enumerate(((jobs["ok"], fleet.nodes[1], 2), (jobs["oom"], fleet.nodes[2], 1))):
        allocation = Allocation.objects.create(job=job, generation=i + 1, epoch=1, created_at=job.started_at,
                                               started_at=job.started_at, released_at=job.finished_at,
                                               state=AllocationState.RELEASED)
        AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=k, live=False)
                                          for k in range(gpus))
    f.make_job(fleet.ml, name="running", state=JobState.RUNNING, started_at=now)
    accounting.catch_up(now)
    return jobs


def test_the_api_csv_is_the_pages_csv_for_the_same_filters(fleet, alice, ended) -> None:
    page = Client()
    page.force_login(fleet.users["owner"])
    for params in ({}, {"state": "failed"}, {"ran_on": fleet.nodes[1].name}, {"exit_code": "0"}):
        body = _body(alice.get(URL, params))
        assert body == _body(page.get("/history.csv", params)), params
    rows = list(csv.reader(io.StringIO(_body(alice.get(URL)))))
    assert rows[0] == job_history.CSV_COLUMNS
    # alice's team's ended jobs, newest end first; not the running one, not another team's
    assert [r[1] for r in rows[1:-1]] == ["oom", "ok"]
    assert [r[14] for r in rows[1:-1]] == ["0.5000", "1.0000"]  # 1 GPU × 30 min, 2 GPUs × 30 min
    assert [r[13] for r in rows[1:-1]] == ["1", "2"]  # the GPUs each held
    assert rows[-1][:2] == ["TOTAL", "2 jobs"] and rows[-1][14] == "1.5000"
    failed = list(csv.reader(io.StringIO(_body(alice.get(URL, {"state": "failed"})))))
    assert [r[1] for r in failed[1:-1]] == ["oom"]
    assert failed[-1][:2] == ["TOTAL", "1 job"]  # until 5 Dec "1 jobs"


@pytest.mark.parametrize(("params", "field"), [
    ({"finished_after": "yesterday-ish"}, "finished_after"),
    ({"exit_code": "1.5"}, "exit_code"),
    ({"ran_longer_than_s": "-1"}, "ran_longer_than_s"),
    ({"state": "running"}, "state"),
    ({"tema": "ml"}, "tema"),
])
def test_a_bad_filter_is_a_400_naming_it(alice, ended, params, field) -> None:
    response = alice.get(URL, params)
    assert response.status_code == 400, response.content
    assert list(response.json()["errors"]) == [field]


def test_who_reads_what(clients, ended) -> None:
    def names(role: str) -> list[str]:
        return [r[1] for r in list(csv.reader(io.StringIO(_body(clients[role].get(URL)))))[1:-1]]

    assert names("admin") == ["oom", "ok", "theirs"]
    assert names("other_team") == ["theirs"]
    assert names("finance") == []  # as the jobs list answers finance
    assert clients["anonymous"].get(URL).status_code == 401
    assert clients["agent"].get(URL).status_code in (401, 403)



def _ran(job: Any, node: Any, gpus: int, generation: int) -> None:
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=job.started_at,
                                           started_at=job.started_at, released_at=job.finished_at,
                                           state=AllocationState.RELEASED)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=k, live=False)
                                      for k in range(gpus))


def test_each_job_costs_what_showback_charges_it_and_the_total_adds_up_to_the_cent(fleet, alice) -> None:
    """`cost_usd`, the CSV's last column: each job's GPU time priced by the accounting's own rule
    (`job_costs.run_costs`: Span.held_cost at the rate in force at each instant, as the job's
    runs panel and showback charge it), so finance can sum the CSV and find showback's figure.
    Until 2 Dec the CSV had GPU-hours and no money. Here across a price change (H100 $2.50, then
    $3.10 from 15 min into `ok`'s run), with a job of odd seconds whose cost is no whole cent and
    one that never held a GPU."""
    from decimal import Decimal

    now = timezone.now().replace(second=0, microsecond=0)
    t0 = now - timedelta(hours=3)

    def ended(name: str, gpus: int, start: timedelta, length: timedelta) -> Any:
        return f.make_job(fleet.ml, name=name, gpus=gpus, state=JobState.SUCCEEDED, exit_code=0, submitted_at=t0,
                          started_at=t0 + start, finished_at=t0 + start + length)

    ok = ended("ok", 2, timedelta(0), timedelta(minutes=30))
    oom = ended("oom", 1, timedelta(minutes=40), timedelta(minutes=30))
    odd = ended("odd", 3, timedelta(minutes=80), timedelta(seconds=433))
    never = f.make_job(fleet.ml, name="never", state=JobState.CANCELLED, submitted_at=t0, finished_at=t0)
    _ran(ok, fleet.nodes[1], 2, 1)
    _ran(oom, fleet.nodes[2], 1, 2)
    _ran(odd, fleet.nodes[3], 3, 3)
    f.make_price_rate(fleet.h100, "3.1000", effective_from=t0 + timedelta(minutes=15))
    accounting.catch_up(now)

    rows = list(csv.reader(io.StringIO(_body(alice.get(URL)))))
    assert rows[0][-1] == "cost_usd" and job_history.CSV_COLUMNS[-1] == "cost_usd"
    cost = {r[1]: r[-1] for r in rows[1:-1]}
    # ok: 2 GPUs × 15 min × $2.50 + 2 × 15 min × $3.10; oom: 1 × 30 min × $3.10; odd: 3 × 433 s × $3.10/h
    assert cost == {"ok": "2.80", "oom": "1.55", "odd": "1.12", "never": "0.00"}
    showback = alice.get("/api/v1/showback/", {"window": "1d", "group_by": "job"}).json()["data"][0]
    by_job = {job.name: Decimal(str(showback[str(job.pk)]["gpuCost"])) for job in (ok, oom, odd)}
    assert {name: Decimal(c) for name, c in cost.items() if name != "never"} == by_job
    assert str(never.pk) not in showback
    assert rows[-1][0] == "TOTAL" and rows[-1][-1] == "5.47" == str(sum(by_job.values()))
    # the runs' own rule, job by job
    for job in (ok, oom, odd, never):
        assert cost[job.name] == str(job_costs.run_costs(job.pk, now).total_usd)
