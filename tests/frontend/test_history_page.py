"""`/history/`: the jobs that ended, as `qm history` lists them, in the browser's page and its CSV.

The filters are the jobs API's (a bad value is a 400 naming its parameter, never a 500), the
scope the API's (a member reads their teams' jobs, finance none, an admin every team's), the
GPU-hours the accounting's (`job_history.gpu_hours`, the figure the API says), and the totals
cover the whole filtered set, not the page shown."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import Allocation, AllocationGpu, Job, Node, Project, Team, UsageRollup
from controlplane.services import accounting, job_costs, job_history
from frontend.views.history import PAGE_SIZE
from tests.controlplane import factories as f
from tests.controlplane.built_once import Shared, built_once

pytestmark = pytest.mark.django_db
H = "/history/"
CSV = "/history.csv"
_generation = iter(range(1, 100_000))


def _held(job: Job, node: Node, start: datetime, end: datetime, gpus: int) -> None:
    allocation = Allocation.objects.create(
        job=job, generation=next(_generation), epoch=1, created_at=start, started_at=start, released_at=end,
        state=AllocationState.RELEASED)
    AllocationGpu.objects.bulk_create(
        AllocationGpu(allocation=allocation, node=node, gpu_index=i, live=False) for i in range(gpus))


def _ended(team: str, name: str, started: datetime, minutes: int, state: str = JobState.SUCCEEDED,
           **kw: Any) -> Job:
    kw.setdefault("exit_code", 0 if state == JobState.SUCCEEDED else 1)
    submitter = kw.pop("user", None)
    return f.make_job(
        Team.objects.get(name=team), name=name, state=state, submitted_at=started - timedelta(minutes=5),
        started_at=started, finished_at=started + timedelta(minutes=minutes),
        submitter=get_user_model().objects.get(username=submitter) if submitter else None, **kw)


def _node(name: str) -> Node:
    return Node.objects.get(name=name)


def _rows(response: Any) -> list[dict[str, str]]:
    """The history table's rows, as cells keyed by the column headings."""
    html = response.content.decode()
    head = re.search(r"<thead>(.*?)</thead>", html, re.S)
    assert head, html[:2000]
    columns = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<th[^>]*>(.*?)</th>", head.group(1), re.S)]
    body = re.search(r"<tbody>(.*?)</tbody>", html, re.S)
    rows = []
    for tr in re.findall(r"<tr data-job[^>]*>(.*?)</tr>", body.group(1), re.S):
        cells = re.findall(r"<t[hd]([^>]*)>(.*?)</t[hd]>", tr, re.S)  # the row's head (Job), then its cells
        row = {}
        for column, (attrs, inner) in zip(columns, cells, strict=True):
            value = re.search(r'data-value="([^"]*)"', attrs)
            row[column] = value.group(1) if value else re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", inner)).strip()
        rows.append(row)
    return rows


def _ids(response: Any) -> list[int]:
    assert response.status_code == 200, response.content[:600]
    return [int(row["Job"]) for row in _rows(response)] if b"<tbody>" in response.content else []


def _csv(client: Client, params: dict[str, Any] | None = None) -> list[list[str]]:
    response = client.get(CSV, params or {})
    assert response.status_code == 200, response.content[:400] if not response.streaming else ""
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


def _totals(response: Any) -> tuple[int, str, str]:
    html = response.content.decode()
    found = re.search(r'id="history-totals" data-jobs="(\d+)" data-gpu-hours="([\d.]+)" '
                      r'data-lost-gpu-hours="([\d.]+)"', html)
    assert found, html[:3000]
    return int(found.group(1)), found.group(2), found.group(3)


def test_the_nav_offers_history_to_those_who_read_jobs(client_for, demo) -> None:
    assert 'data-nav="history"' in client_for("alice").get("/").content.decode()
    assert 'data-nav="history"' in client_for("admin").get("/").content.decode()
    assert 'data-nav="history"' not in client_for("finn").get("/").content.decode()


def test_a_name_a_spreadsheet_would_run_is_written_as_text(client_for, demo) -> None:
    """A job name is free text: `=HYPERLINK(...)` opened by finance in a spreadsheet would be a
    formula (CSV injection). The cell is written with a leading quote; numbers keep their sign."""
    t0 = timezone.now() - timedelta(hours=1)
    _ended("vision", '=HYPERLINK("http://x.invalid","payroll")', t0, 10, JobState.FAILED, exit_code=-9)
    _ended("vision", "-rf", t0 - timedelta(minutes=1), 10)
    body = dict((cells[1], cells) for cells in _csv(client_for("alice"))[1:-1])
    assert set(body) == {"'=HYPERLINK(\"http://x.invalid\",\"payroll\")", "'-rf"}
    assert body["'-rf"][6] == "0" and body["'=HYPERLINK(\"http://x.invalid\",\"payroll\")"][6] == "-9"


# ---------------------------------------------------------------------------- query counts


def test_the_page_costs_the_same_queries_for_3_jobs_or_40(client_for, demo) -> None:
    alice = client_for("alice")
    now = timezone.now().replace(second=0, microsecond=0)
    t0 = now - timedelta(hours=2)

    def add(n: int) -> None:
        for i in range(n):
            job = _ended("vision", f"j{i}", t0 + timedelta(minutes=i), 10, user="alice", gpus=1,
                         project=Project.objects.get(name="detector"))
            _held(job, _node(f"h100-0{1 + i % 4}"), t0 + timedelta(minutes=i), t0 + timedelta(minutes=i + 10), gpus=1)
        accounting.catch_up(now)

    def queries() -> int:
        alice.get(H)  # the session and memberships read once, as on any page
        with CaptureQueriesContext(connection) as captured:
            response = alice.get(H)
        assert response.status_code == 200
        return len(captured)

    add(3)
    three = queries()
    assert len(_rows(alice.get(H))) == 3
    add(37)
    forty = queries()
    assert len(_rows(alice.get(H))) == min(PAGE_SIZE, 40)
    # the session, the user, the memberships, the team menu; the closed totals (one:
    # services/closed_history.py, none built here), the totals (one); the page's jobs; their
    # GPU-hours and nodes (one for the page); their costs, remembered or priced (one:
    # job_costs.jobs_costs; four until 5 Dec 2026); the whole set's cost (job_costs.jobs_total_cost, one)
    assert forty == three == 10, f"{three} queries for 3 jobs, {forty} for 40"
    assert UsageRollup.objects.filter(job__team__name="vision").exists()  # the figures were read, not zero
    # once every ended job's cost is remembered, the rows' costs are one query: nothing to price
    shown = _rows(alice.get(H))
    assert job_costs.remember_ended_job_costs(timezone.now()) == 40
    assert queries() == 10
    assert _rows(alice.get(H)) == shown


def test_the_csv_reads_a_chunk_of_jobs_per_query_not_a_job(client_for, demo, monkeypatch) -> None:
    monkeypatch.setattr(job_history, "CSV_CHUNK", 10)
    alice = client_for("alice")
    t0 = timezone.now() - timedelta(hours=1)
    for i in range(25):
        _ended("vision", f"c{i}", t0, 10)
    _csv(alice)
    with CaptureQueriesContext(connection) as captured:
        lines = _csv(alice)
    assert len(lines) == 27
    # the session and the user, memberships, the ids, then per chunk of 10: the jobs, their figures,
    # their costs, remembered or priced (job_costs.jobs_costs: one statement; up to four until 5 Dec 2026)
    assert len(captured) <= 4 + 3 * 3, [q["sql"][:120] for q in captured]
    # every cost remembered: no chunk prices a job
    assert job_costs.remember_ended_job_costs(timezone.now()) == 25
    with CaptureQueriesContext(connection) as captured:
        assert _csv(alice) == lines
    assert len(captured) <= 4 + 3 * 3, [q["sql"][:120] for q in captured]


# The tests below on `history` share one build of it (tests/controlplane/built_once.py), so
# those without it come first.
SHARED = Shared()


@pytest.fixture(scope="module")
def _history_once(django_db_setup: Any, django_db_blocker: Any) -> Iterator[dict[str, int]]:
    """The demo fleet and the history below, built once for the module's tests on it (the
    accounting's catch-up over four hours of the demo's 16 nodes took ~1 s a test, 3 under load)."""

    def build() -> dict[str, int]:
        seed_demo_fleet()
        return {key: job.pk for key, job in _build_history().items()}

    yield from built_once(django_db_blocker, build, SHARED)


@pytest.fixture(autouse=True)
def _shared_rows_only_on_their_tests(request: pytest.FixtureRequest) -> None:
    SHARED.only_for(request, "history")


@pytest.fixture
def history(_history_once: dict[str, int], demo: None) -> dict[str, Job]:
    """The shared history's jobs, read again for each test (the demo fleet is seeded already)."""
    return {key: Job.objects.get(pk=pk) for key, pk in _history_once.items()}


def _build_history() -> dict[str, Job]:
    """Ended jobs of two teams, within the last hours (the rollup catches up to now), plus jobs
    that have not ended (never listed): a preempted-then-finished vision job on two nodes."""
    now = timezone.now().replace(second=0, microsecond=0)
    t0 = now - timedelta(hours=4)
    jobs = {
        "moved": _ended("vision", "moved", t0 + timedelta(minutes=40), 30, user="alice", gpus=8,
                        preemption_count=1, requeue_count=1, lost_gpu_seconds=8 * 600.0,
                        project=Project.objects.get(name="detector")),
        "oom": _ended("vision", "oom", t0 + timedelta(minutes=90), 20, JobState.FAILED, user="alice", gpus=2,
                      exit_code=137),
        "cancelled": _ended("vision", "cancelled", t0 + timedelta(minutes=120), 5, JobState.CANCELLED, gpus=1,
                            exit_code=None),
        "llm": _ended("language", "llm", t0 + timedelta(minutes=30), 60, user="bob", gpus=4,
                      project=Project.objects.get(name="llm-pretrain")),
    }
    _held(jobs["moved"], _node("h100-01"), t0, t0 + timedelta(minutes=30), gpus=8)  # preempted off h100-01
    _held(jobs["moved"], _node("h100-02"), t0 + timedelta(minutes=40), t0 + timedelta(minutes=70), gpus=8)
    _held(jobs["oom"], _node("h100-03"), t0 + timedelta(minutes=90), t0 + timedelta(minutes=110), gpus=2)
    _held(jobs["cancelled"], _node("h100-03"), t0 + timedelta(minutes=120), t0 + timedelta(minutes=125), gpus=1)
    _held(jobs["llm"], _node("h100-04"), t0 + timedelta(minutes=30), t0 + timedelta(minutes=90), gpus=4)
    f.make_job(Team.objects.get(name="vision"), name="still-running", state=JobState.RUNNING, started_at=now)
    f.make_job(Team.objects.get(name="vision"), name="waiting")
    accounting.catch_up(now)
    return jobs


def test_the_totals_say_a_loss_below_a_hundredth_of_a_gpu_hour_as_such(client_for, demo) -> None:
    # Before: "0.00 GPU-hours of work lost" of 10 GPU-seconds, as `qm history` said it then.
    t0 = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    _ended("vision", "saved", t0, 10, user="alice", gpus=1, lost_gpu_seconds=10)
    html = client_for("alice").get(H).content.decode()
    assert "</strong> GPU-hours held, less than 0.01 GPU-hours of work lost to preemptions and requeues" in html


def test_a_rows_loss_below_a_hundredth_of_a_gpu_hour_reads_as_such_in_its_cell(client_for, demo) -> None:
    # Before: the Lost GPU-h cell said "0.00" of 10 GPU-seconds lost (its data-value kept 0.0028).
    t0 = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=2)
    _ended("vision", "saved", t0, 10, user="alice", gpus=1, lost_gpu_seconds=10)
    html = client_for("alice").get(H).content.decode()
    assert 'data-value="0.0028">&lt; 0.01</td>' in html


# ------------------------------------------------------------------------------- the table


def test_the_page_lists_ended_jobs_newest_end_first_with_the_apis_figures(client_for, history) -> None:
    alice = client_for("alice")
    response = alice.get(H)
    rows = _rows(response)
    j = history
    # vision's ended jobs only: not language's, not the running or waiting ones
    assert [int(r["Job"]) for r in rows] == [j["cancelled"].pk, j["oom"].pk, j["moved"].pk]
    moved = rows[2]
    assert (moved["Name"], moved["Team"], moved["Project"], moved["User"]) == ("moved", "vision", "detector", "alice")
    assert moved["Elapsed"] == "00:30:00" and moved["GPUs held"] == "8" and moved["Exit"] == "0"
    # 8 GPUs for 30 min on each of two nodes: 8 GPU-hours, the accounting's and the API's figure
    api = alice.get(f"/api/v1/jobs/{j['moved'].pk}/").json()
    assert api["gpu_hours"] == 8.0 == float(moved["GPU-h"])
    assert job_costs.job_cost(j["moved"].pk)["gpu_hours_allocated"] == Decimal("8.0000")
    assert float(moved["Lost GPU-h"]) == api["lost_gpu_hours"] == 1.3333
    assert moved["Ran on"] == "h100-01 h100-02" and api["ran_on"] == ["h100-01", "h100-02"]
    oom = rows[1]
    assert (oom["Exit"], oom["State"], float(oom["GPU-h"])) == ("137", "Failed", 0.6667)
    assert f'href="/jobs/{j["oom"].pk}/"' in response.content.decode()


def test_totals_cover_the_whole_filtered_set_not_the_page(client_for, history, monkeypatch) -> None:
    monkeypatch.setattr("frontend.views.history.PAGE_SIZE", 2)
    alice = client_for("alice")
    first = alice.get(H)
    assert len(_rows(first)) == 2
    # 8 + 20 min × 2 GPUs + 5 min × 1 GPU: 8 + 0.6667 + 0.0833
    assert _totals(first) == (3, "8.7500", "1.3333")
    assert "page 1 of 2" in first.content.decode()
    second = alice.get(H, {"page": 2})
    assert _ids(second) == [history["moved"].pk] and _totals(second) == _totals(first)
    # each total is the sum of the rows' own figures, over every page
    figures = [job_history.gpu_hours(job) for job in Job.objects.filter(team__name="vision", state__in=job_history.ENDED_STATES)]
    assert f"{sum(Decimal(str(g)) for g in figures):.4f}" == "8.7500"
    failed = alice.get(H, {"state": ["failed", "cancelled"]})
    assert _totals(failed) == (2, "0.7500", "0.0000")
    # two jobs that lost the same work count it twice (the totals group jobs by state and loss)
    _ended("vision", "lost-too", timezone.now() - timedelta(hours=1), 10, lost_gpu_seconds=8 * 600.0,
           requeue_count=1)
    assert _totals(alice.get(H)) == (4, "8.7500", "2.6666")


# ----------------------------------------------------------------------------- the filters


def test_every_history_filter_narrows_as_the_api_does(client_for, history) -> None:
    admin = client_for("admin")
    j = history
    window_start = (j["oom"].finished_at - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")
    cases: list[tuple[dict[str, Any], list[Job]]] = [
        ({"team": "language"}, [j["llm"]]),
        ({"project": "detector"}, [j["moved"]]),
        ({"user": "alice"}, [j["oom"], j["moved"]]),
        ({"state": "failed"}, [j["oom"]]),
        ({"state": ["failed", "cancelled"]}, [j["cancelled"], j["oom"]]),
        ({"exit_code": "137"}, [j["oom"]]),
        ({"ran_longer_than_s": "1800"}, [j["llm"]]),  # 60 min; moved ran exactly 30 (not more)
        ({"ran_on": "h100-01"}, [j["moved"]]),  # preempted off it, finished elsewhere
        ({"ran_on": "h100-03"}, [j["cancelled"], j["oom"]]),
        ({"finished_after": window_start}, [j["cancelled"], j["oom"]]),
        ({"finished_before": window_start}, [j["llm"], j["moved"]]),
        ({"started_after": j["oom"].started_at.isoformat()}, [j["cancelled"], j["oom"]]),
        ({"started_before": j["moved"].started_at.isoformat()}, [j["llm"]]),
        ({"team": "vision", "state": "succeeded", "ran_on": "h100-02"}, [j["moved"]]),
    ]
    for params, expected in cases:
        page = _ids(admin.get(H, params))
        # the page's times without a zone are UTC (its fields say so); the API takes them with it
        zoned = {k: v + "Z" if k in ("finished_after", "finished_before") else v for k, v in params.items()}
        api = admin.get("/api/v1/jobs/", {**zoned, "ordering": "-finished_at",
                                          "state": params.get("state", job_history.ENDED_STATES)}).json()
        assert page == [job.pk for job in expected] == [row["id"] for row in api["results"]], params


@pytest.mark.parametrize(("params", "field"), [
    ({"finished_after": "yesterday-ish"}, "finished_after"),
    ({"started_before": "2026-13-45T00:00"}, "started_before"),
    ({"exit_code": "1.5"}, "exit_code"),
    ({"exit_code": "99999999999"}, "exit_code"),
    ({"ran_longer_than_s": "1h"}, "ran_longer_than_s"),
    ({"ran_longer_than_s": "-1"}, "ran_longer_than_s"),
    ({"state": "running"}, "state"),  # not a state a job ends in
    ({"tema": "vision"}, "tema"),  # a typo is refused, as the API refuses it, not ignored
])
def test_a_bad_filter_is_a_400_naming_the_field_on_the_page_and_the_csv(client_for, history, params, field) -> None:
    alice = client_for("alice")
    response = alice.get(H, params)
    assert response.status_code == 400
    html = response.content.decode()
    assert f'data-error-for="{field}"' in html and "<tbody>" not in html
    assert f"<code>{field}</code>:" in html
    download = alice.get(CSV, params)
    assert download.status_code == 400 and download.content.decode().startswith(f"{field}: ")
    # the API names the same field for the same value (the state aside: the API lists running jobs)
    if field not in ("state",):
        api = alice.get("/api/v1/jobs/", params)
        assert api.status_code == 400 and list(api.json()["errors"]) == [field]


# ---------------------------------------------------------------------------- who sees what


def test_each_reader_sees_what_the_api_shows_them(client_for, history) -> None:
    j = history
    every = [j["cancelled"].pk, j["oom"].pk, j["llm"].pk, j["moved"].pk]
    assert _ids(client_for("admin").get(H)) == every
    assert _ids(client_for("bob").get(H)) == [j["llm"].pk]
    # another team's name is refused as a missing one (it matched nothing, as a typo did)
    other = client_for("bob").get(H, {"team": "vision"})
    assert other.status_code == 400 and "no team named &#x27;vision&#x27; whose jobs you may read" in other.content.decode()
    finn = client_for("finn").get(H)
    assert _ids(finn) == [] and _totals(finn) == (0, "0.0000", "0.0000")
    assert "Finance accounts see no jobs" in finn.content.decode()
    assert client_for("finn").get("/api/v1/jobs/").json()["count"] == 0  # as the API answers finance
    assert len(_csv(client_for("bob"))) == 3  # header, llm, TOTAL
    assert Client().get(H).status_code == 302  # signed out: to the login page


# --------------------------------------------------------------------------------- the CSV


def test_the_csv_is_the_table_every_row_of_the_filters_and_a_total(client_for, history, monkeypatch) -> None:
    monkeypatch.setattr("frontend.views.history.PAGE_SIZE", 2)  # the CSV is not one page
    monkeypatch.setattr(job_history, "CSV_CHUNK", 2)  # and is read in chunks, in the table's order
    admin = client_for("admin")
    params = {"state": ["succeeded", "failed", "cancelled"]}
    lines = _csv(admin, params)
    assert lines[0] == job_history.CSV_COLUMNS
    table = _rows(admin.get(H, params)) + _rows(admin.get(H, {**params, "page": 2}))
    body, total = lines[1:-1], lines[-1]
    assert len(body) == len(table) == 4
    for row, cells in zip(table, body, strict=True):
        line = dict(zip(job_history.CSV_COLUMNS, cells, strict=True))
        assert line["job_id"] == row["Job"] and line["name"] == row["Name"] and line["team"] == row["Team"]
        assert (line["project"] or "–") == row["Project"] and (line["user"] or "–") == row["User"]
        assert (line["exit_code"] or "–") == row["Exit"] and line["elapsed"] == row["Elapsed"]
        assert line["last_run_gpus"] == row["GPUs held"] and line["ran_on"] == row["Ran on"]
        assert line["gpu_hours"] == row["GPU-h"] and line["lost_gpu_hours"] == row["Lost GPU-h"]
        assert line["cost_usd"] == row["Cost"]
        api = admin.get(f"/api/v1/jobs/{line['job_id']}/").json()
        assert (float(line["gpu_hours"]), int(line["elapsed_s"]), line["state"]) == (
            api["gpu_hours"], api["elapsed_s"], api["state"])
        assert line["finished_at"] == api["finished_at"].replace("+00:00", "Z")[:19] + "Z"
    jobs, gpu_hours, lost = _totals(admin.get(H, params))
    assert total[:2] == ["TOTAL", f"{jobs} jobs"] and total[14:16] == [gpu_hours, lost]
    assert Decimal(gpu_hours) == sum(Decimal(cells[14]) for cells in body)
    # the page links the CSV of its own filters
    assert f'href="{CSV}?state=succeeded&amp;state=failed&amp;state=cancelled"' in admin.get(H, params).content.decode()


def test_the_csv_is_byte_for_byte_each_jobs_own_figures_remembered_or_priced(client_for, history, monkeypatch) -> None:
    """The whole CSV, byte for byte, against each job's figures read on their own: its fields,
    the accounting's GPU-hours (`job_costs.job_cost`), its GPU rows' nodes, and its cost priced
    from its runs (`job_costs.run_costs`, never a remembered row), in chunks of 2 over a mix of
    jobs whose cost is remembered and jobs priced on the fly: a requeued job on two nodes, a
    failed one, one that ran over a day and held no GPU, one cancelled before it started (no
    start, no elapsed, no node, no cost) whose name a spreadsheet would run."""
    monkeypatch.setattr(job_history, "CSV_CHUNK", 2)
    now = timezone.now().replace(second=0, microsecond=0)
    long = _ended("language", "long", now - timedelta(days=2), 26 * 60 + 7, JobState.TIMED_OUT, user="bob", gpus=2,
                  exit_code=None, lost_gpu_seconds=1234.5, requeue_count=2)
    never = f.make_job(Team.objects.get(name="vision"), name="=never", state=JobState.CANCELLED,
                       submitted_at=now - timedelta(hours=3, microseconds=499_999),
                       finished_at=now - timedelta(hours=2, microseconds=500_000))
    assert job_costs.remember_ended_job_costs(timezone.now()) == 6
    with connection.cursor() as cursor:  # these two priced on the fly, the others read remembered
        cursor.execute(f"DELETE FROM {job_costs.ENDED_JOB_COSTS} WHERE job_id IN (%s, %s)",
                       [history["moved"].pk, long.pk])
    jobs = [history["cancelled"], history["oom"], history["llm"], history["moved"], never, long]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id FROM {job_costs.ENDED_JOB_COSTS} WHERE job_id = ANY(%s)", [[j.pk for j in jobs]])
        assert {pk for (pk,) in cursor.fetchall()} == {
            history["cancelled"].pk, history["oom"].pk, history["llm"].pk, never.pk}

    def second(at: datetime | None) -> str:
        return "" if at is None else (at + timedelta(microseconds=500_000)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def last_run_gpus(job: Job) -> str:
        latest = job.allocations.order_by("-generation").first()
        return "" if latest is None else str(latest.gpus.count())

    def clock(seconds: int) -> str:
        days, rest = divmod(seconds, 86400)
        return (f"{days}-" if days else "") + f"{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"

    lines, gpu_hours, lost, cost = [",".join(job_history.CSV_COLUMNS)], Decimal(0), Decimal(0), Decimal(0)
    for job in sorted(jobs, key=lambda j: (j.finished_at, j.pk), reverse=True):
        job.refresh_from_db()
        elapsed = None if job.started_at is None else int((job.finished_at - job.started_at).total_seconds())
        hours = job_costs.job_cost(job.pk)["gpu_hours_allocated"]
        nodes = sorted(set(AllocationGpu.objects.filter(allocation__job=job).values_list("node__name", flat=True)))
        usd = job_costs.run_costs(job.pk, timezone.now()).total_usd
        lines.append(",".join([
            str(job.pk), "'" + job.name if job.name.startswith("=") else job.name, job.team.name,
            job.project.name if job.project else "", job.submitter.username if job.submitter else "", job.state,
            "" if job.exit_code is None else str(job.exit_code), second(job.submitted_at), second(job.started_at),
            second(job.finished_at), "" if elapsed is None else str(elapsed), "" if elapsed is None else clock(elapsed),
            str(job.gpus), last_run_gpus(job), f"{hours:.4f}", f"{Decimal(job.lost_gpu_seconds) / 3600:.4f}", " ".join(nodes), f"{usd:.2f}"]))
        gpu_hours, lost, cost = gpu_hours + hours, lost + round(Decimal(job.lost_gpu_seconds) / 3600, 4), cost + usd
    lines.append(",".join(["TOTAL", "6 jobs", *[""] * 12, f"{gpu_hours:.4f}", f"{lost:.4f}", "", f"{cost:.2f}"]))
    expected = "\n".join(lines) + "\n"
    # what the expectation says, spelled out for three of its rows
    assert f"\n{never.pk},'=never,vision,,,cancelled,,{second(never.submitted_at)},,{second(never.finished_at)},,,1,,0.0000,0.0000,,0.00\n" in expected
    assert f",timed_out,,{second(long.submitted_at)}," in expected and ",94020,1-02:07:00,2,,0.0000,0.3429,,0.00\n" in expected
    assert f",8.0000,1.3333,h100-01 h100-02,{job_costs.run_costs(history['moved'].pk, timezone.now()).total_usd}\n" in expected
    response = client_for("admin").get(CSV)
    assert response.status_code == 200
    body = b"".join(response.streaming_content)
    assert body.decode() == expected


def test_the_pages_costs_are_the_csvs_to_the_cent_rows_and_total(client_for, history, monkeypatch) -> None:
    """The Cost column and the totals' cost say what the CSV's `cost_usd` cells and its TOTAL row
    say, to the cent (the rows `job_costs.jobs_costs`, the CSV's rule; the total
    `job_costs.jobs_total_cost`, the same rule's cents added up in one query), on
    every page: across a price change in the middle of a run and a run of odd seconds, whose
    cost is no whole cent. Until 2 Dec the page had no cost at all."""
    monkeypatch.setattr("frontend.views.history.PAGE_SIZE", 2)
    h100, tier = _node("h100-01").gpu_type, _node("h100-01").capacity_tier
    assert _node("h100-02").capacity_tier == tier
    rates = list(h100.price_rates.filter(capacity_tier=tier).order_by("effective_from"))
    assert rates, "the demo prices H100s"
    now = timezone.now().replace(second=0, microsecond=0)
    t0 = history["moved"].started_at - timedelta(minutes=40)  # the fixture's
    f.make_price_rate(h100, "3.1700", tier=tier, effective_from=t0 + timedelta(minutes=50))
    odd = _ended("vision", "odd", now - timedelta(minutes=30), 8, user="alice", gpus=3)
    _held(odd, _node("h100-02"), odd.started_at, odd.started_at + timedelta(seconds=433), gpus=3)
    accounting.catch_up(now)
    admin = client_for("admin")
    pages = [admin.get(H), admin.get(H, {"page": 2}), admin.get(H, {"page": 3})]
    table = [row for page in pages for row in _rows(page)]
    lines = _csv(admin)
    body, total = lines[1:-1], lines[-1]
    csv_cost = {cells[0]: cells[-1] for cells in body}
    assert len(table) == len(body) == 5
    assert {row["Job"]: row["Cost"] for row in table} == csv_cost
    # the rule is the runs' own: moved ran 8 GPUs on h100-01 before the change and on h100-02
    # across it (40 min → 70 min, the new price from 50 min); odd's 3 × 433 s are no whole cent
    for name in ("moved", "llm", "oom", "cancelled"):
        job = history[name]
        assert csv_cost[str(job.pk)] == str(job_costs.run_costs(job.pk, timezone.now()).total_usd)
    old = rates[-1].usd_per_gpu_hour
    moved = (8 * Decimal(30) / 60 * old + 8 * Decimal(10) / 60 * old + 8 * Decimal(20) / 60 * Decimal("3.17"))
    assert csv_cost[str(history["moved"].pk)] == f"{moved.quantize(Decimal('0.01'))}"
    assert csv_cost[str(odd.pk)] == f"{(3 * Decimal(433) / 3600 * Decimal('3.17')).quantize(Decimal('0.01'))}"
    for page in pages:
        found = re.search(r'data-cost-usd="([\d.]+)"', page.content.decode())
        assert found and found.group(1) == total[-1] == f"{sum(Decimal(c) for c in csv_cost.values()):.2f}"
        assert f'class="cost">${Decimal(total[-1]):,.2f}</span>' in page.content.decode()
    # a member's page prices their team's jobs only, as their CSV does
    alice = client_for("alice")
    alice_total = re.search(r'data-cost-usd="([\d.]+)"', alice.get(H).content.decode()).group(1)
    assert alice_total == _csv(alice)[-1][-1] != total[-1]
    # every page prices its own rows (one call) and adds up the whole set in one query, whatever
    # its size: until 2 Dec a set of more than 5,000 jobs (PAGE_COST_LIMIT) had no total cost
    admin.get(H)
    with CaptureQueriesContext(connection) as captured:
        again = admin.get(H)
    assert re.search(r'data-cost-usd="([\d.]+)"', again.content.decode()).group(1) == total[-1]
    assert "added up in the CSV" not in again.content.decode()
    # the page's costs, remembered (none here) or priced, in one statement; the total; the closed
    # totals (services/closed_history.py: none built here)
    assert len(captured) == 7 + 1 + 1 + 1, [q["sql"][:100] for q in captured]



def test_a_time_the_page_cannot_read_says_the_form_its_fields_take(client_for, history) -> None:
    """The page's time fields are labelled UTC and take a time without a zone (the API refuses
    one: services/instants); text that is no time says so in the API's words, with the page's form."""
    response = client_for("alice").get(H, {"finished_after": "yesterday"})
    assert response.status_code == 400
    assert ("&#x27;yesterday&#x27; is not a time: give a date and time in UTC, e.g. 2026-12-01T00:00, or with "
            "its zone, 2026-12-01T00:00:00Z") in response.content.decode()
