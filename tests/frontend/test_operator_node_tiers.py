"""An operator opens one node and reads its GPU time in the three tiers over a chosen window:
allocated, active (allocated and not stalled) and productive (active and doing useful work), as
GPU-hours and shares of the node's own capacity, a chart over time and a row per GPU.

On h100-01 (8 GPUs), for the last two hours, as the agent reports them:
- a training job on GPUs 0–3, activity 0.5, 15 steps/s throughout (steady: productive = active);
- a job on GPUs 4–5 stalled throughout (activity 0);
- a job on GPU 6 busy at 0.5 but reporting no progress at all;
- GPU 7 free.
So over any window inside those two hours: allocated 7/8 = 87.5 %, active (4 × 0.5 + 0.5) / 8 =
31.25 %, productive 4 × 0.5 / 8 = 25 % of the node's GPU time; over the last hour about 7.0, 2.5
and 2.0 GPU-hours of 8.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import Node, Team
from controlplane.services import accounting
from controlplane.services.usage_tiers import floor_to
from frontend import figures
from tests.controlplane.accounting.builders import hold, report, running_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def node_at_work(demo) -> Node:
    node = Node.objects.get(name="h100-01")
    team = Team.objects.get(name="vision")
    now = timezone.now()
    since = floor_to(now, 60) - timedelta(hours=2)
    trainer = hold(running_job(team, gpus=4, started_at=since, name="trainer"), [(node, 4)], since)
    stalled = hold(running_job(team, gpus=2, started_at=since, name="stalled"), [(node, 2)], since, first_index=4)
    silent = hold(running_job(team, gpus=1, started_at=since, name="silent"), [(node, 1)], since, first_index=6)
    every = timedelta(seconds=10)
    report(trainer, node, since, now, every=every, activity=0.5, steps_per_s=15)
    report(stalled, node, since, now, every=every, activity=0.0, steps_per_s=0)
    report(silent, node, since, now, every=every, activity=0.5, steps_per_s=0)
    accounting.catch_up(now)
    return node


def tier_cells(html: str, tier: str) -> tuple[str, str]:
    row = html.split(f'<tr data-tier="{tier}"><th scope="row">', 1)[1].split("</tr>", 1)[0]
    cells = [c.split("</td>", 1)[0] for c in row.split("<td>")[1:]]
    return cells[0], cells[1]


def gpu_cells(html: str, index: int) -> list[str]:
    row = html.split(f'<tr data-gpu="{index}"><th scope="row">', 1)[1].split("</tr>", 1)[0]
    return [row.split("</th>", 1)[0]] + [c.split("</td>", 1)[0] for c in row.split("<td>")[1:]]


def test_the_node_page_shows_its_three_tiers_for_the_chosen_window(client_for, node_at_work):
    page = client_for("admin").get(f"/nodes/{node_at_work.name}/?window=1h")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="node-tiers-window"' in html and '<option value="1h" selected>' in html
    assert tier_cells(html, "allocated") == ("7.0", "87.5%")
    assert tier_cells(html, "active") == ("2.5", "31.25%")
    assert tier_cells(html, "productive") == ("2.0", "25%")
    assert "Share of h100-01&#x27;s capacity (8.0 GPU-h)" in html or "Share of h100-01's capacity (8.0 GPU-h)" in html
    # per GPU: the trainer's, the stalled job's, the silent job's and the free one
    # (the window ends at the last rollup, a moment before the page: just under an hour per GPU)
    assert gpu_cells(html, 0)[1:] == ["1.00", "0.50", "0.50", "100% / 50% / 50%"]
    assert gpu_cells(html, 4)[1:] == ["1.00", "0", "0", "100% / 0% / 0%"]
    assert gpu_cells(html, 6)[1:] == ["1.00", "0.50", "0", "100% / 50% / 0%"]
    assert gpu_cells(html, 7)[1:] == ["0", "0", "0", "0% / 0% / 0%"]
    # the chart: a step per minute, in the tiers' colours, shares of the node's GPU time
    chart = page.context["charts"]["node_tiers"]
    assert not chart.empty and chart.title == "Utilization of h100-01 in three tiers"
    traces = {t["name"]: t for t in chart.figure["data"]}
    assert list(traces) == ["allocated", "active", "productive"]
    assert len(traces["allocated"]["x"]) >= 60
    # every whole minute (the newest is partial: its last sample's steps were rounded to whole steps)
    assert set(traces["allocated"]["y"][:-2]) == {87.5}
    assert set(traces["active"]["y"][:-2]) == {31.25}
    assert set(traces["productive"]["y"][:-2]) == {25.0}
    assert "One point per minute" in chart.caption


def test_another_window_and_another_reader_see_the_same_node_figures(client_for, node_at_work):
    html = client_for("bob").get(f"/nodes/{node_at_work.name}/?window=6h").content.decode()
    # the node's figures are fleet facts; the jobs on it stay another team's
    assert "trainer" not in html and "a job of team vision" in html
    # six hours asked, but the accounting began with this work two hours ago: the node's capacity
    # counts from then (its first two hours are not read as a third of six)
    assert '<option value="6h" selected>' in html
    allocated_h, allocated_share = tier_cells(html, "allocated")
    assert 14.0 <= float(allocated_h) <= 14.2  # 7 GPUs × 2 h and up to a minute
    assert allocated_share == "87.5%"
    assert "the accounting began at" in html


def test_a_node_nobody_used_says_so(client_for, node_at_work):
    page = client_for("alice").get("/nodes/h100-02/")
    html = page.content.decode()
    assert tier_cells(html, "allocated")[0] == "0" and tier_cells(html, "productive")[1] == "0%"
    assert '<option value="24h" selected>' in html  # the default window


def test_the_node_page_reads_its_tiers_in_the_same_queries_whatever_its_history(client_for, node_at_work):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = client_for("admin")

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/nodes/{node_at_work.name}/?window=6h").status_code == 200
        return len(queries)

    before = count()
    # twenty more short jobs came and went on GPU 7 over the two hours, each reported every 10 s
    team = Team.objects.get(name="vision")
    start = floor_to(timezone.now(), 60) - timedelta(hours=2)
    for i in range(20):
        at = start + timedelta(minutes=5 * i)
        job = hold(running_job(team, gpus=1, started_at=at, name=f"short-{i}"), [(node_at_work, 1)], at,
                   at + timedelta(minutes=4), first_index=7)
        report(job, node_at_work, at, at + timedelta(minutes=4), every=timedelta(seconds=10), activity=0.5)
    accounting.catch_up(timezone.now())
    assert count() == before == 16  # the page's 9 (its maintenance windows one), and the tiers' 7


def test_a_week_reads_whole_hours_from_the_hourly_rows_with_the_same_figures_and_queries(client_for, node_at_work,
                                                                                          monkeypatch):
    """Over 7 days (hour buckets) the page reads the node's whole hours from its hourly activity
    rows: the same table, per-GPU rows and chart as reading every sample, in the same queries."""
    from functools import partial

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from controlplane.models import NodeActivityRollup
    from controlplane.services.node_tiers import node_tiers
    from frontend.views import nodes as view

    assert NodeActivityRollup.objects.filter(node=node_at_work).exists()
    client = client_for("admin")

    def page(hourly: bool) -> tuple[str, list, int]:
        monkeypatch.setattr(view, "node_tiers", partial(node_tiers, hourly=hourly))
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/nodes/{node_at_work.name}/?window=7d")
        assert response.status_code == 200
        chart = response.context["charts"]["node_tiers"].figure["data"]
        # (the shares to a millionth of a percent: both reads round each figure to the µs)
        return (response.content.decode(), [(t["name"], t["x"], [round(y, 6) for y in t["y"]]) for t in chart],
                len(queries))

    (rows_html, rows_chart, rows_queries), (raw_html, raw_chart, raw_queries) = page(True), page(False)
    for tier in ("allocated", "active", "productive"):
        assert tier_cells(rows_html, tier) == tier_cells(raw_html, tier)
    assert tier_cells(rows_html, "allocated")[1] == "87.5%"
    for index in range(8):
        assert gpu_cells(rows_html, index) == gpu_cells(raw_html, index)
    assert rows_chart == raw_chart and len(rows_chart[0][1]) >= 2  # an hour a point
    assert rows_queries == raw_queries


def test_the_node_pages_window_says_the_range_drawn_and_how_far_short_of_now_it_ends(client_for, node_at_work):
    """The window starts at now − 1 h but the figures end at the last rollup: the page said "the
    last hour" for a range a few seconds (or minutes) short of it, and the chart said nothing
    (QA, 7 Dec). The note and the chart's caption name the range drawn, and how far before the
    window's end the rollup stood; the chart draws exactly that range."""
    from controlplane.models import AccountingCursor
    from frontend.templatetags.qm import duration, utc

    rolled = timezone.now() - timedelta(seconds=42)
    AccountingCursor.objects.filter(name=accounting.CURSOR_NAME).update(rolled_until=rolled)
    page = client_for("admin").get(f"/nodes/{node_at_work.name}/?window=1h")
    f = page.context["tiers"]["figures"]
    assert f.end == rolled and f.asked_end > rolled
    short = duration(f.asked_end - f.end)
    said = (f"From {utc(f.start)} to {utc(f.end)}: the last hour up to the last accounting rollup, {short} "
            f"before the window's end at {utc(f.asked_end)} (not rolled up yet)")
    assert said in page.content.decode()
    chart = page.context["charts"]["node_tiers"]
    assert f"Drawn from {utc(f.start)} to {utc(f.end)}: up to the last accounting rollup, {short} before the " \
           f"window's end at {utc(f.asked_end)} (not rolled up yet)." in chart.caption
    x = chart.figure["data"][0]["x"]
    assert (x[0], x[-1]) == (figures.ts(f.start), figures.ts(f.end))


def test_the_overviews_tier_chart_says_the_range_it_draws(client_for, node_at_work):
    """The overview's tier chart ends at the same rollup: its caption says so, as the node page's."""
    from controlplane.models import AccountingCursor
    from frontend.templatetags.qm import utc

    rolled = timezone.now() - timedelta(seconds=42)
    AccountingCursor.objects.filter(name=accounting.CURSOR_NAME).update(rolled_until=rolled)
    chart = client_for("admin").get("/ui/overview.json?window=1h").json()["charts"]["utilization"]
    assert re.search(rf"Drawn from .* to {utc(rolled)}: up to the last accounting rollup, 4\d s before the window's "
                     r"end at .* UTC \(not rolled up yet\)\.", chart["caption"]), chart["caption"]


def test_a_node_that_joined_after_the_accounting_began_says_one_start_for_its_capacity(client_for, node_at_work):
    """Both instants fall inside the window: the note says the later one is where the node's
    capacity counts from, once. Until 7 Dec it said "the node joined the fleet at 22:06:58 UTC, its
    capacity counts from then; the accounting began at 22:06:00 UTC, capacity counts from then":
    two starts, the second not so for this node (seen on the demo)."""
    from controlplane.choices import EventKind
    from controlplane.models import Event
    from frontend.templatetags.qm import utc

    joined = floor_to(timezone.now(), 60) - timedelta(hours=1)  # an hour after the accounting began
    Event.objects.create(kind=EventKind.NODE_REGISTERED, reason="Registered", actor="agent:h100-01",
                         node=node_at_work, created_at=joined)

    html = client_for("admin").get(f"/nodes/{node_at_work.name}/?window=6h").content.decode()

    note = html.split('id="node-tiers-window"', 1)[1].split('<p class="note">', 1)[1].split("</p>", 1)[0]
    assert note.count("counts from") == 1, note
    assert f"the node joined the fleet at {utc(joined)}, its capacity counts from then" in note
    assert "the accounting began at" in note  # still said: nothing was measured before it
