"""Every chart on every page: a title, axis titles with units, a caption, a figure plotly accepts,
and an empty state that says what will appear."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import plotly.graph_objects as go
import pytest
from django.utils import timezone

from controlplane.services import accounting
from controlplane.services.cycle import run_cycle
from frontend.templatetags import qm
from tests.frontend.test_what_if import wait_done
from tests.frontend.what_if_steps import key_of, start_replay

pytestmark = pytest.mark.django_db

FIGURE = re.compile(r'<script id="fig-([\w-]+)" type="application/json">(.*?)</script>', re.S)
BOX = re.compile(r'<figure class="chart-box" data-chart="([\w-]+)"[^>]*>(.*?)</figure>', re.S)
# A numeric axis names its unit; a category axis (teams, pools, states) names what it lists.
UNITS = re.compile(r"\((UTC|USD|minutes|GPUs[^)]*|%[^)]*|×[^)]*|index[^)]*)\)|\bGPUs\b|\bjobs\b|\bUSD\b|GPU-hour|^% ")


def charts_of(html: str) -> dict[str, dict]:
    boxes = {key: body for key, body in BOX.findall(html)}
    out = {}
    for key, raw in FIGURE.findall(html):
        body = boxes[key]
        caption = re.search(r"<figcaption>(.*?)</figcaption>", body, re.S).group(1).strip()
        empty = re.search(r'<div class="empty"( hidden)?>\s*<strong>(.*?)</strong>\s*<p>(.*?)</p>', body, re.S)
        out[key] = {"figure": json.loads(raw), "caption": caption, "empty": "" if empty.group(1) else empty.group(3)}
    return out


def assert_contract(key: str, chart: dict) -> None:
    figure = chart["figure"]
    go.Figure(figure)  # raises on any property plotly.js would not understand
    layout = figure["layout"]
    assert layout["title"]["text"], f"{key}: no title"
    for axis in ("xaxis", "yaxis"):
        title = layout[axis]["title"]["text"]
        assert title, f"{key}: {axis} has no title"
        if layout[axis].get("type") != "category":
            assert UNITS.search(title), f"{key}: numeric {axis} names no unit: {title!r}"
    assert len(chart["caption"]) > 30 and chart["caption"].count("\n") == 0, f"{key}: caption missing or not one line"
    # plotly draws a legend only from two traces on: a chart of one named trace (one node state,
    # one priority class, one pool) would show a colour nobody names, unless it says so.
    in_legend = [t for t in figure["data"] if t.get("name") and t.get("showlegend", True)]
    if len(in_legend) == 1:
        assert layout.get("showlegend") is not None, f"{key}: one named trace ({in_legend[0]['name']}) and no legend"
    if chart["empty"]:
        assert "appear" in chart["empty"] or "Run a replay" in chart["empty"], f"{key}: empty state says nothing"
    else:
        assert figure["data"], f"{key}: not empty, yet no trace"


def test_every_chart_keeps_the_contract_with_data(client_for, submit_as, samples):
    samples(40, every=timedelta(minutes=2))
    for i in range(3):
        submit_as("alice", name=f"fill-{i}", gpus=8)
    submit_as("bob", name="waits", gpus=64, gpu_types=("H100-80GB",))
    run_cycle("test", now=timezone.now() - timedelta(hours=1))
    accounting.catch_up(timezone.now())
    job_id = client_for("alice").get("/jobs/").context["jobs"][0].pk
    what_if = start_replay(client_for("admin"), days="1", placement="spread")
    wait_done(key_of(what_if))  # the replay runs in the background: let it finish
    for url in ["/", "/jobs/", f"/jobs/{job_id}/", "/teams/", "/showback/", "/showback/?group_by=project", "/nodes/",
                "/nodes/h100-01/", what_if]:
        html = client_for("admin" if "jobs/" not in url else "alice").get(url).content.decode()
        charts = charts_of(html)
        if url not in ("/jobs/",):
            assert charts, f"{url} shows no chart"
        for key, chart in charts.items():
            assert_contract(f"{url} {key}", chart)


def test_every_chart_keeps_the_contract_on_an_empty_fleet(client_for):
    for url in ["/", "/teams/", "/showback/", "/nodes/", "/nodes/h100-01/"]:
        charts = charts_of(client_for("admin").get(url).content.decode())
        assert charts
        for key, chart in charts.items():
            assert_contract(f"{url} {key}", chart)


def test_empty_overview_says_what_will_appear(client_for):
    charts = charts_of(client_for("alice").get("/").content.decode())
    assert "No scheduling cycle has run" in charts["queue"]["empty"]
    assert "allocated, active and productive" in charts["utilization"]["empty"]
    assert charts["heatmap"]["empty"] == ""  # the demo fleet's nodes exist even before any cycle


def test_overview_json_carries_the_same_charts_as_the_page(client_for, samples):
    samples(5)
    client = client_for("alice")
    page = charts_of(client.get("/").content.decode())
    live = client.get("/ui/overview.json").json()["charts"]
    assert set(live) == set(page)
    assert live["queue"]["figure"]["layout"]["title"]["text"] == page["queue"]["figure"]["layout"]["title"]["text"]


def test_queue_chart_of_one_team_is_stacked_by_priority_class(client_for):
    from tests.frontend.page_data import sample

    now = timezone.now()
    # two samples from before per-team classes were stored, then three that have them
    for i in range(5):
        old = i < 2
        sample(now - timedelta(minutes=5 - i),
               pending_by_team={"vision": 3, "language": 2 if old else 4},
               pending_by_priority={"research": 5} if old else {"research": 4, "production": 3},
               pending_by_team_priority={} if old else {"vision": {"research": 3},
                                                         "language": {"production": 3, "research": 1}})
    charts = charts_of(client_for("alice").get("/?team=language&window=1h").content.decode())
    queue = charts["queue"]["figure"]
    assert queue["layout"]["title"]["text"] == "Queue depth of team language by priority class"
    # the classes highest first (production 1000, research 500); older samples as their own grey series
    assert [(t["name"], t["y"], t.get("stackgroup")) for t in queue["data"]] == [
        ("production", [0, 0, 3, 3, 3], "pending"), ("research", [0, 0, 1, 1, 1], "pending"),
        ("all classes (older samples)", [2, 2, 0, 0, 0], "pending")]
    assert "stacked by priority class" in charts["queue"]["caption"]


def test_tiles_count_now_take_the_oldest_wait_from_the_latest_sample_and_todays_lost_work(client_for, samples,
                                                                                          submit_as):
    from tests.frontend.page_data import preempted_event

    samples(3, allocated_gpus=100, stranded_gpus=7, pending_jobs=11, oldest_feasible_pending_s=90.0)
    job = submit_as("alice")
    preempted_event(job, timezone.now(), 7200.0)
    preempted_event(job, timezone.now(), 3600.0, kind="job.requeued")
    preempted_event(job, timezone.now() - timedelta(days=2), 99999.0)  # not today
    text = client_for("alice").get("/ui/overview.json").json()["text"]
    # the fleet and the queue now (no job holds a GPU; alice's waits), not the samples' made-up counts
    assert text["allocated_gpus"] == "0" and text["total_gpus"] == "128"
    assert text["stranded_gpus"] == "0" and text["pending_jobs"] == "1"
    assert text["oldest_feasible_pending_s"] == qm.duration(90.0)
    assert text["preemptions_today"] == "1" and text["fenced_requeues_today"] == "1"
    assert text["lost_gpu_hours_today"] == "3.0"


def test_the_lost_work_tile_says_a_small_loss_as_such(client_for, submit_as):
    # Before: the tile said "0.0" of 18 GPU-seconds lost today (one decimal, whatever the amount).
    from tests.frontend.page_data import preempted_event

    preempted_event(submit_as("alice"), timezone.now(), 18.0)
    text = client_for("alice").get("/ui/overview.json").json()["text"]
    assert text["lost_gpu_hours_today"] == "< 0.01"
