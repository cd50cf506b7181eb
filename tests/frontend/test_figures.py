"""Figure builders: what each chart shows for hand-built inputs (no database)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

from frontend import figures
from frontend.heatmap import NodeRow, Slot

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=timezone.utc)


def node(name: str, slots: list[Slot | None], state: str = "ready", pool: str = "h100") -> NodeRow:
    return NodeRow(id=hash(name) % 1000, name=name, pool=pool, leaf_switch="leaf-1", spine="spine-1", state=state,
                   gpu_type="H100-80GB", capacity_tier="reserved", slots=tuple(slots))


def test_heat_map_colours_each_slot_by_its_team_and_counts_free_slots():
    rows = [node("n1", [Slot("vision", 7, team_id=1), Slot("vision", 7, team_id=1), None, None]),
            node("n2", [Slot("language", None, team_id=2), None, None, None], state="cordoned")]
    chart = figures.fleet_heatmap(rows)
    heat = chart.figure["data"][0]
    assert heat["colorbar"]["ticktext"] == ["free", "away", "language", "vision"]
    # an idle slot of the cordoned node is away, as qm sinfo, the tiles and the Nodes page say, not free
    assert heat["text"][1][1].endswith("<br>away: the node takes no work") and heat["text"][0][2].endswith("<br>free")
    assert heat["z"] == [[3, 3, 0, 0], [2, 1, 1, 1]]
    assert heat["customdata"][0][:2] == [7, 7]
    assert "a job of another team" in heat["text"][1][0]
    assert chart.figure["data"][1]["text"] == ["2", "–"]  # free slots per row; none free on a cordoned node
    assert chart.notes["free_gpus"] == 2  # the cordoned node's free slots take no work


def test_heat_map_highlights_one_jobs_gpus():
    rows = [node("n1", [Slot("vision", 7, team_id=1), Slot("vision", 8, team_id=1), None])]
    heat = figures.fleet_heatmap(rows, key="placement", highlight_job=7).figure["data"][0]
    assert heat["colorbar"]["ticktext"] == ["free", "this job", "vision"]
    assert heat["z"] == [[1, 2, 0]]


def test_heat_map_colour_bar_has_room_for_every_label_even_on_one_node():
    # a job page's map of one node: 260 px tall, 170 px of plot; "free" and "this job" each
    # need their label's room on the bar, or they are drawn over each other (as they were at
    # 26 px each)
    rows = [node("n1", [Slot("vision", 7, team_id=1)] * 4 + [None] * 4)]
    figure = figures.fleet_heatmap(rows, key="placement", highlight_job=7).figure
    heat = figure["data"][0]
    plot_px = figure["layout"]["height"] - 90
    per_label_px = heat["colorbar"]["len"] * plot_px / len(heat["colorbar"]["ticktext"])
    assert per_label_px >= figures.COLOURBAR_LABEL_PX


def test_heat_map_with_nodes_of_different_sizes_leaves_missing_slots_blank():
    rows = [node("n1", [None] * 8), node("n2", [None] * 4)]
    heat = figures.fleet_heatmap(rows).figure["data"][0]
    assert heat["z"][1][4:] == [None] * 4


def test_queue_depth_stacks_priority_classes_highest_first():
    samples = [{"at": T0 + timedelta(minutes=i), "pending_by_priority": {"batch": i, "production": 1},
                "pending_by_team": {}} for i in range(3)]
    chart = figures.queue_depth(samples, ["production", "research", "batch"])
    assert [t["name"] for t in chart.figure["data"]] == ["production", "batch"]
    assert chart.figure["data"][1]["y"] == [0, 1, 2]
    assert all(t["stackgroup"] == "pending" for t in chart.figure["data"])


def test_queue_depth_of_a_team_stacks_its_classes_and_older_samples_as_their_total():
    samples = [
        {"at": T0, "pending_by_priority": {"batch": 4}, "pending_by_team": {"x": 4}, "pending_by_team_priority": {}},
        {"at": T0 + timedelta(minutes=1), "pending_by_priority": {"batch": 2, "production": 1},
         "pending_by_team": {"x": 2, "y": 1}, "pending_by_team_priority": {"x": {"batch": 2}, "y": {"production": 1}}},
        # a cycle with nothing pending at all: zero everywhere, not an "older sample"
        {"at": T0 + timedelta(minutes=2), "pending_by_priority": {}, "pending_by_team": {}, "pending_by_team_priority": {}},
    ]
    data = figures.queue_depth(samples, ["production", "batch"], team="x").figure["data"]
    assert [(t["name"], t["y"]) for t in data] == [("batch", [0, 2, 0]), (figures.UNCLASSIFIED, [4, 0, 0])]
    assert [(t["name"], t["y"]) for t in figures.queue_depth(samples, ["production", "batch"], team="y").figure["data"]] \
        == [("production", [0, 1, 0])]


def test_utilization_tiers_are_percentages_of_capacity():
    points = [{"at": T0, "allocated": 0.85, "active": 0.765, "productive": 0.306}]
    data = figures.utilization_tiers(points).figure["data"]
    assert [(t["name"], t["y"]) for t in data] == [("allocated", [85.0]), ("active", [76.5]),
                                                    ("productive", [30.6])]


def test_utilization_steps_hold_the_last_bucket_until_it_ends():
    """A bucket's value is a step from its start to its end: the last bucket (and a window's
    only one, in a fleet's first hour or day) must be a visible segment, not a lone point that
    plotly draws as nothing."""
    only = [{"at": T0, "until": T0 + timedelta(minutes=42), "allocated": 0.5, "active": 0.4, "productive": 0.3}]
    data = figures.utilization_tiers(only).figure["data"]
    assert [(t["name"], t["x"], t["y"]) for t in data] == [
        (tier, ["2026-11-29 09:00:00", "2026-11-29 09:42:00"], [y, y])
        for tier, y in (("allocated", 50.0), ("active", 40.0), ("productive", 30.0))
    ]
    two = [{"at": T0, "until": T0 + timedelta(hours=1), "allocated": 0.2, "active": 0.1, "productive": 0.1},
           {"at": T0 + timedelta(hours=1), "until": T0 + timedelta(hours=1, minutes=5), "allocated": 0.9,
            "active": 0.7, "productive": 0.6}]
    allocated = figures.utilization_tiers(two).figure["data"][0]
    assert allocated["x"] == ["2026-11-29 09:00:00", "2026-11-29 10:00:00", "2026-11-29 10:05:00"]
    assert allocated["y"] == [20.0, 90.0, 90.0]


def test_timeline_draws_a_bar_per_stretch_and_a_mark_per_event():
    segments = [{"state": "pending", "start": T0, "end": T0 + timedelta(minutes=5)},
                {"state": "running", "start": T0 + timedelta(minutes=5), "end": None}]
    events = [{"created_at": T0, "kind": "job.submitted", "reason": "Submitted", "message": "hi"}]
    chart = figures.job_timeline(segments, events, now=T0 + timedelta(minutes=65))
    bars = {t["name"]: t for t in chart.figure["data"] if t["type"] == "bar"}
    assert bars["Pending"]["x"] == [300_000.0] and bars["Running"]["x"] == [3_600_000.0]
    assert bars["Running"]["base"] == ["2026-11-29 09:05:00"]


def test_box_plot_carries_precomputed_quartiles_not_raw_values():
    stats = [{"team": "vision", "n": 10, "q1": 1.0, "median": 2.0, "q3": 3.0, "low": 0.5, "high": 5.0, "mean": 2.2}]
    trace = figures.distribution_box("waits", "t", "c", "wait (minutes)", stats, "none", team_ids={"vision": 1, "language": 2}).figure["data"][0]
    assert (trace["q1"], trace["median"], trace["q3"], trace["lowerfence"], trace["upperfence"]) == (
        [1.0], [2.0], [3.0], [0.5], [5.0])
    assert "y" not in trace


def test_box_plot_shows_the_longest_value_beyond_the_whisker_that_pulls_the_mean_up():
    """Without outliers drawn, a mean above the upper whisker floats there with nothing to
    explain it: the longest value is marked when it lies beyond the whisker, and the hover
    says the mean and the longest."""
    stats = [{"team": "vision", "n": 9, "q1": 0.0, "median": 0.1, "q3": 0.2, "low": 0.0, "high": 0.5, "mean": 0.75,
              "max": 5.0},
             {"team": "language", "n": 4, "q1": 1.0, "median": 2.0, "q3": 3.0, "low": 0.5, "high": 4.0, "mean": 2.2,
              "max": 4.0}]
    data = figures.distribution_box("waits", "t", "c", "wait (minutes)", stats, "none", team_ids={"vision": 1, "language": 2}).figure["data"]
    boxes = [t for t in data if t["type"] == "box"]
    longest = [t for t in data if t["type"] == "scatter"]
    assert [b["name"] for b in boxes] == ["vision", "language"]
    assert [(t["x"], t["y"]) for t in longest] == [(["vision"], [5.0])]  # language's longest is its whisker
    assert "mean 0.75" in boxes[0]["hovertemplate"] and "longest 5" in boxes[0]["hovertemplate"]


def test_every_empty_chart_says_what_will_appear():
    empties = [
        figures.queue_depth([], []), figures.utilization_tiers([]), figures.stranded_gpus([]),
        figures.largest_free_block([]), figures.oldest_feasible_wait([]), figures.fleet_heatmap([]),
        figures.job_timeline([], [], now=T0), figures.quota_usage("H100-80GB", []), figures.dominant_share([], {}),
        figures.jobs_by_state([]), figures.cost_over_time({}, "team", "day", 86400), figures.cost_breakdown([], "team"),
        figures.unit_costs([], "team"), figures.waste([], "team", True), figures.nodes_by_state([]),
    ]
    for chart in empties:
        assert chart.empty and ("appear" in chart.empty), chart.key
        assert chart.figure["data"] == []


def test_a_stretch_with_no_cycle_is_shaded_and_said_not_drawn_as_a_steady_fleet():
    """The scheduler stopped for ten minutes: the step-wise lines hold their last value across
    it, so the stretch is shaded grey and the caption says no cycle ran."""
    at = [T0 + timedelta(seconds=5 * i) for i in range(20)]
    at += [at[-1] + timedelta(minutes=10) + timedelta(seconds=5 * i) for i in range(20)]
    samples = [{"at": t, "stranded_gpus": 1, "allocated_gpus": 10, "total_gpus": 16, "unavailable_gpus": 0}
               for t in at]
    chart = figures.stranded_gpus(samples)
    shapes = chart.figure["layout"]["shapes"]
    assert [(s["x0"], s["x1"]) for s in shapes] == [(figures.ts(at[19]), figures.ts(at[20]))]
    assert "no scheduling cycle ran" in chart.caption
    import plotly.graph_objects as go

    go.Figure(chart.figure)  # plotly.js understands the bands
    steady = figures.stranded_gpus(samples[:20])
    assert "shapes" not in steady.figure["layout"] and "no scheduling cycle" not in steady.caption


def _cycle_samples(at: list[datetime], first_id: int = 1, id_step: int = 1) -> list[dict[str, Any]]:
    return [{"id": first_id + id_step * i, "at": t, "stranded_gpus": 1, "allocated_gpus": 10, "total_gpus": 16,
             "unavailable_gpus": 0, "pending_by_priority": {"research": 2}, "pending_by_team": {"vision": 2},
             "largest_free_block_by_pool": {"a100": 4}, "dominant_share_by_team": {"vision": 0.25}}
            for i, t in enumerate(at)]


def _gap_bands(chart: figures.Chart) -> list[tuple[str, str]]:
    return [(s["x0"], s["x1"]) for s in chart.figure["layout"].get("shapes", [])]


def test_a_43_second_restart_is_shaded_where_samples_come_every_6_seconds():
    """A control-plane restart of 43 s between samples stored every 6 s: the lines held their
    values across it unmarked, since only stretches of more than a minute were shaded (QA, 7 Dec).
    A stretch is a gap once it is more than twice the series' own step."""
    at = [T0 + timedelta(seconds=6 * i) for i in range(30)]
    at += [at[-1] + timedelta(seconds=43) + timedelta(seconds=6 * i) for i in range(30)]
    samples = _cycle_samples(at)
    for chart in (figures.stranded_gpus(samples), figures.queue_depth(samples, []),
                  figures.largest_free_block(samples), figures.dominant_share(samples, {})):
        assert _gap_bands(chart) == [(figures.ts(at[29]), figures.ts(at[30]))], chart.key
        assert "no scheduling cycle ran" in chart.caption, chart.key


def test_a_thinned_series_shades_a_stretch_by_its_drawn_step_and_its_silent_tail_by_one_sample():
    """A window thinned to every 3rd sample (ids 3 apart) of samples 6 s apart draws a point every
    18 s: a step of 30 s is no gap there (under 2 × 18), one of 61 s is. The loop silent since
    the last sample is a gap after twice one sample's step (the last point is the newest sample)."""
    at = [T0 + timedelta(seconds=18 * i) for i in range(20)]
    at += [at[-1] + timedelta(seconds=30)] + [at[-1] + timedelta(seconds=30 + 18 * i) for i in range(1, 10)]
    at += [at[-1] + timedelta(seconds=61)] + [at[-1] + timedelta(seconds=61 + 18 * i) for i in range(1, 10)]
    samples = _cycle_samples(at, id_step=3)
    assert _gap_bands(figures.stranded_gpus(samples)) == [(figures.ts(at[29]), figures.ts(at[30]))]
    assert _gap_bands(figures.stranded_gpus(samples, until=at[-1] + timedelta(seconds=10))) == [
        (figures.ts(at[29]), figures.ts(at[30]))]
    silent = at[-1] + timedelta(seconds=13)
    assert _gap_bands(figures.stranded_gpus(samples, until=silent)) == [
        (figures.ts(at[29]), figures.ts(at[30])), (figures.ts(at[-1]), figures.ts(silent))]


def test_a_late_sample_within_twice_the_step_is_no_gap():
    """Samples 6 s apart (a 2 s cycle, one sample stored at most every 5 s), now and then 10 or 12 s
    (a cycle that ran long): within twice the step, not shaded at each late one."""
    steps = [6, 6, 6, 12, 6, 6, 10, 6, 6, 6, 12, 6]
    at = [T0]
    for step in steps * 3:
        at.append(at[-1] + timedelta(seconds=step))
    assert _gap_bands(figures.stranded_gpus(_cycle_samples(at))) == []


def test_what_if_bar_labels_are_numbers_and_the_unit_is_on_the_axis_and_in_the_hover() -> None:
    """Two runs' labels "0.36 min" and "0.39 min" ran together over their narrow bars ("0.36
    min0.39 min", h50's walk, 5 Dec): the label is the number, the axis and the hover the unit."""
    runs = [("live (pack)", {"wait_mean_min": 0.36}), ("what if (spread)", {"wait_mean_min": 0.39})]

    chart = figures.what_if_bars("wait", "Waits", "caption", "wait (minutes)", (("wait_mean_min", "mean"),),
                                 runs, suffix=" min")

    live, other = chart.figure["data"]
    assert live["text"] == ["0.36"] and other["text"] == ["0.39"]
    assert live["customdata"] == ["0.36 min"] and "%{customdata}" in live["hovertemplate"]
    assert chart.figure["layout"]["yaxis"]["title"]["text"] == "wait (minutes)"
