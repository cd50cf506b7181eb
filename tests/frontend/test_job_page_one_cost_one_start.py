"""A researcher reads one cost and one start for a job, wherever she looks, as showback counts
them. Before 6 Dec the job page said two costs (the accounting rollup's, behind by a rollup or
more: $0.00 for a job whose minutes were not rolled up yet, beside "All 2 runs cost $17.54"
under Runs), and "Started" meant the bind in the history (the job's `started_at`, from which its
GPU-hours and cost count) but the agents' report, a minute later, in the Runs table, whose "Ran
for" was a minute shorter than the history's Elapsed."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone
from django.utils.html import strip_tags

from controlplane.models import Job, UsageRollup
from controlplane.services import job_costs
from frontend.templatetags.qm import duration, usd
from tests.controlplane.job_runs_story import idle_nodes, preempted_then_succeeded

pytestmark = pytest.mark.django_db


def _table(html: str, table: str) -> tuple[list[str], dict[str, list[str]]]:
    """A table's column headings (their words) and its rows' cells (their HTML) by row key."""
    found = re.search(rf'<table class="{table}"[^>]*>(.*?)</table>', html, re.S)
    assert found is not None, table
    head, body = found.group(1).split("</thead>")
    headings = [" ".join(strip_tags(h).replace("\u00ad", "").replace("&shy;", "").split())
                for h in re.findall(r'<th scope="col">(.*?)</th>', head, re.S)]
    rows = {key: [c.strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for key, row in re.findall(r'<tr (?:id|data-job)="([^"]+)"[^>]*>(.*?)</tr>', body, re.S)}
    return headings, rows


def test_the_job_page_says_one_cost_its_runs_and_showback_agree_on(client_for, submit_as) -> None:
    job = submit_as("alice", name="twice-run", gpus=2)
    preempted_then_succeeded(job, *idle_nodes(2), now=timezone.now())
    assert not UsageRollup.objects.filter(job=job).exists()  # accounting has not rolled it up yet
    total = job_costs.run_costs(job.pk, timezone.now()).total_usd
    assert total > 0

    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    cost = re.search(r"<dt>Cost</dt><dd[^>]*>(.*?)</dd>", html, re.S)
    assert cost is not None
    assert strip_tags(cost.group(1)).startswith(f"{usd(total)}, at the prices showback charges"), cost.group(1)
    assert f"All 2 runs held 7.02 GPU-hours and cost {usd(total)}, at the prices showback charges." in html
    dollars = set(re.findall(r"\$\d[\d,]*\.\d\d", strip_tags(html.split('id="job-cost"')[1].split("</dl>")[0])))
    assert dollars == {usd(total)}, dollars  # no second figure beside it


def test_the_runs_table_and_the_history_say_the_same_start_and_elapsed(client_for, submit_as) -> None:
    job = submit_as("alice", name="twice-run", gpus=2)
    story = preempted_then_succeeded(job, *idle_nodes(2), now=timezone.now())
    job = Job.objects.get(pk=job.pk)
    assert job.started_at == story.succeeded.created_at  # the job's start: its latest run's bind
    client = client_for("alice")

    runs_head, runs = _table(client.get(f"/jobs/{job.pk}/").content.decode(), "runs")
    history_head, history = _table(client.get("/history/").content.decode(), "jobs history")
    latest, row = runs["run-2"], history[str(job.pk)]

    started = strip_tags(row[history_head.index("Started (UTC)")])
    assert strip_tags(latest[runs_head.index("Started (UTC)")]) == started
    elapsed = re.search(r'data-seconds="(\d+)"', client.get("/history/").content.decode().split(
        f'<tr data-job="{job.pk}">')[1]).group(1)
    assert int(elapsed) == 2 * 3600
    assert strip_tags(latest[runs_head.index("Elapsed")]) == duration(int(elapsed))
    # its agents' report is said beside it, under its own name
    assert strip_tags(latest[runs_head.index("Agents up (UTC)")]) != started
