"""Every product page's outline as a screen reader lists it, read from the HTML the server sends
(the test client, no browser): a language, a title naming the page, one h1, headings that never
skip a level (h1 then h3 reads as a missing section), and every table's header cells `th` with a
scope, so a screen reader names a cell's column. Found on 6 Dec: no `th` had a scope; a job's page
went from its h1 to h3 (Why it waits, Progress, Cost so far) and a node's to h3 (Jobs on it,
Events). A table whose first column names its row (showback by team or project, teams, what-if's
comparison and quota table, a node's tiers and GPUs, the Nodes page's tables, on the page and in
its live update, a node's jobs, the maintenance windows) heads each row with it, `th scope="row"`,
so a cell is read as "language, Cost, $12.50"; until 6 Dec those were plain cells (the Nodes
page's until its rows were written in one pass, frontend/node_rows.py; a node's jobs and the
maintenance windows until later that day; the jobs list, the history and a job's runs, headed by
the job's or the run's number, later still). The browser's own view of the same, and more (contrast, keyboard, charts):
tests/frontend/test_pages_accessible_browser.py."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.template.loader import render_to_string
from django.test import Client

from controlplane.choices import NodeState
from controlplane.models import Job, Node
from controlplane.services import maintenance
from controlplane.services.cycle import run_cycle
from frontend.replay_worker import Replay
from frontend.views.whatif import replay_charts
from tests.frontend.test_history_page import _ended
from tests.frontend.test_job_page_runs import _three_runs
from tests.frontend.test_operator_node_tiers import node_at_work  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

HEADING = re.compile(r"<h([1-6])\b[^>]*>", re.I)
TH = re.compile(r"<th\b[^>]*>", re.I)


def outline(html: str) -> list[str]:
    """What is wrong with the page's outline (the role rows' template left out: not on the page)."""
    html = re.sub(r"<template\b.*?</template>", "", html, flags=re.S)
    found = []
    if not re.search(r'<html lang="[a-z]{2}', html):
        found.append("no lang")
    levels = [int(m.group(1)) for m in HEADING.finditer(html)]
    if levels.count(1) != 1:
        found.append(f"{levels.count(1)} h1")
    found += [f"h{a} then h{b}" for a, b in zip([0, *levels], levels, strict=False) if b > a + 1]
    found += [f"unscoped {th}" for th in TH.findall(html) if not re.search(r'\bscope="(col|row)"', th)]
    return found


def test_every_page_has_a_title_one_h1_headings_in_order_and_scoped_header_cells(client_for: Any, submit_as: Any) -> None:
    submit_as("alice", name="runs", gpus=8)
    waiting = submit_as("alice", name="waits", gpus=96, gpus_per_node=8)
    run_cycle("test")
    running = Job.objects.get(name="runs")
    assert running.state == "running"
    pages = {
        "alice": [("/", "Overview"), ("/jobs/", "Jobs"), (f"/jobs/{waiting.pk}/", f"Job {waiting.pk}"),
                  (f"/jobs/{running.pk}/", f"Job {running.pk}"), ("/history/", "History"), ("/teams/", "Teams"),
                  ("/notifications/", "Notifications"), ("/what-if/", "What-if")],
        "finn": [("/showback/?window=24h", "Showback"), ("/showback/?window=24h&group_by=project", "Showback")],
        "admin": [("/nodes/", "Nodes"), ("/nodes/h100-01/", "Node h100-01"), ("/what-if/", "What-if")],
    }
    wrong = {}
    for who, visits in pages.items():
        client = client_for(who)
        for path, title in visits:
            response = client.get(path)
            assert response.status_code == 200, (who, path)
            html = response.content.decode()
            found = outline(html)
            if f"<title>{title} · Quartermaster</title>" not in html:
                found.append("title " + re.search(r"<title>(.*?)</title>", html, re.S).group(1))
            if found:
                wrong[f"{who} {path}"] = found[:6]
    login = Client().get("/accounts/login/").content.decode()
    if outline(login) or "<title>Log in · Quartermaster</title>" not in login:
        wrong["/accounts/login/"] = outline(login)
    assert not wrong, wrong


# Tables whose first column names the row, by class; each must be met with rows in the test.
ROW_NAMED = ("showback", "teams", "compare", "node-tiers", "node-gpu-tiers", "nodes", "holders", "maintenance-windows")
TABLE = re.compile(r'<table class="([^"]+)"[^>]*>(.*?)</table>', re.S)


def rows_unnamed(html: str, seen: dict[str, int]) -> list[str]:
    """Body rows of a row-named table whose first cell is not a th scope="row" (an empty table's
    one spanning sentence aside); counts the rows met per table class in ``seen``."""
    found = []
    for classes, table in TABLE.findall(html):
        kind = next((k for k in ROW_NAMED if k in classes.split()), None)
        body = table.split("<tbody>", 1)[1] if kind and "<tbody>" in table else ""
        for row in re.findall(r"<tr\b[^>]*>(.*?)</tr>", body, re.S):
            first = re.match(r"\s*(<t[dh]\b[^>]*>)", row)
            if first is None or "colspan" in first.group(1):
                continue
            seen[kind] = seen.get(kind, 0) + 1
            if not re.match(r'<th scope="row"', first.group(1)):
                found.append(f"{kind}: {re.sub(r'<[^>]+>', ' ', row).split()[:3]}")
    return found


def test_a_table_whose_first_column_names_the_row_heads_each_row_with_it(
        client_for: Any, submit_as: Any, node_at_work: Any) -> None:  # noqa: F811
    # A window coming up on the node: its row in the Nodes page's and the node page's tables.
    maintenance.create(get_user_model().objects.get(username="admin"), start_at=datetime.now(timezone.utc) + timedelta(hours=2),
                       duration_s=3600, reason="firmware upgrade", nodes=[node_at_work.name])
    visits = {"finn": ["/showback/?window=24h", "/showback/?window=24h&group_by=project"],
              "alice": ["/teams/", "/nodes/"],
              "admin": ["/teams/", "/what-if/", f"/nodes/{node_at_work.name}/?window=1h", "/nodes/"]}
    seen: dict[str, int] = {}
    wrong = {}
    for who, paths in visits.items():
        client = client_for(who)
        for path in paths:
            response = client.get(path)
            assert response.status_code == 200, (who, path)
            found = rows_unnamed(response.content.decode(), seen)
            if found:
                wrong[f"{who} {path}"] = found[:4]
    # What-if's comparison, as its fragment arrives once a replay is done.
    runs = [(label, {"allocated": 0.5, "offered_load": 0.6, "wait_mean_min": 1.0, "wait_max_min": 2.0,
                     "stranded_gpus": 0.1, "jobs_done": 3, "jobs_total": 4, "eta_checked": 2, "eta_on_time": 0.5})
            for label in ("live policy", "what-if")]
    replay = Replay(days=1, jobs=4, nodes=2, gpus=16, runs=runs, seconds=0.1,
                    at=datetime(2026, 12, 6, 2, 0, tzinfo=timezone.utc), teams=[{}, {}])
    fragment = render_to_string("frontend/_what_if_result.html",
                                {"state": {"state": "done"}, "result": replay, "charts": replay_charts(replay)})
    found = rows_unnamed(fragment, seen)
    if found:
        wrong["what-if's comparison"] = found[:4]
    # The Nodes page's tables as its live update rewrites them, a retired node's among them.
    nodes_seen = seen.get("nodes", 0)
    Node.objects.filter(pk=node_at_work.pk).update(state=NodeState.RETIRED, retired_at=datetime.now(timezone.utc))
    live = client_for("admin").get("/ui/nodes.json").json()["html"]["nodes-table"]
    assert "retired-nodes" in live
    found = rows_unnamed(live, seen)
    if found:
        wrong["nodes' live update"] = found[:4]
    assert seen.get("nodes", 0) > nodes_seen, "the live update had no node rows"
    assert not wrong, wrong
    # Every kind met with rows, the what-if quota table among the "compare" ones (7 measures + teams).
    assert set(seen) == set(ROW_NAMED), seen
    assert seen["compare"] > 7 and seen["node-tiers"] == 3 and seen["node-gpu-tiers"] == 8, seen


ROW_HEAD = re.compile(r'<th scope="row"[^>]*>(.*?)</th>', re.S)


def row_heads(html: str, table: str, row: str) -> dict[str, list[str]]:
    """The body rows of the table that opens with `table`, keyed by the group of `row` (the row's
    own tag), each with the insides of its `th scope="row"` cells."""
    found = re.search(re.escape(table) + r".*?<tbody[^>]*>(.*?)</tbody>", html, re.S)
    assert found, f"no {table} with a body"
    return {key: ROW_HEAD.findall(cells) for key, cells in re.findall(row + r"(.*?)</tr>", found.group(1), re.S)}


def test_jobs_history_and_runs_tables_name_each_row(client_for: Any, submit_as: Any) -> None:
    """The jobs list, the history and a job's runs (on its page and in its live refresh) head each
    body row with one cell, the one that says which job or run it is, linking the job's page as
    before: a screen reader reads a cell as "12, State, Running", "3, Cost, $0.40". Until 6 Dec
    their first cells were plain (a cell said with its column only)."""
    job, _, _ = _three_runs(submit_as)
    now = datetime.now(timezone.utc).replace(microsecond=0)
    ended = _ended("vision", "done", now - timedelta(hours=1), 30, user="alice")  # (its runs aside: a row is enough)
    client = client_for("alice")

    listed = row_heads(client.get("/jobs/").content.decode(), '<table class="jobs">', r'<tr data-job="(\d+)">')
    history = row_heads(client.get("/history/").content.decode(), '<table class="jobs history" id="history-table">',
                        r'<tr data-job="(\d+)">')
    assert {str(job.pk), str(ended.pk)} <= set(listed), listed
    assert set(history) == {str(ended.pk)}, history
    for pk, heads in [*listed.items(), *history.items()]:
        assert heads == [f'<a href="/jobs/{pk}/">{pk}</a>'], (pk, heads)

    page = client.get(f"/jobs/{job.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-runs"]
    for html in (page, live):
        runs = row_heads(html, '<table class="runs" id="job-runs">', r'<tr id="run-(\d+)"[^>]*>')
        assert runs == {"1": ["1"], "2": ["2"], "3": ["3"]}, runs
