"""Every chart's text alternative (`frontend/chart_figures.figures_table`): the figure's own numbers
as a table, for each kind of chart the pages draw, built by the real figure builders (no database).
Until 6 Dec a chart was plotly's SVG alone: a screen reader read its tick labels. A time series
also has its time range buttons' spans (`time_range`) and its value at each point
(`values_table`), what the pointer's zoom and hover give (tests/frontend/test_charts_by_keyboard_browser.py
works them in the browser)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from frontend import figures
from frontend.chart_figures import number
from frontend.heatmap import NodeRow, Slot
from frontend.templatetags.qm import figure_cell

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=timezone.utc)


def test_numbers_say_at_most_two_decimals() -> None:
    assert [number(3), number(12.5), number(0.125), number(2 / 3, "$"), number(-0.001), number(40, suffix="%")] == [
        "3", "12.5", "0.13", "$0.67", "0", "40%"]


def test_numbers_are_said_as_the_page_says_them_thousands_separated_dollars_to_the_cent() -> None:
    """Until 6 Dec a cost of $1,297.87 on the showback page read "$1297.87" in its chart's figures,
    and a queue of 1,250 jobs "1250"; the figures go out in the live JSON as on the page."""
    assert [number(1297.87, "$"), number(1297.8, "$"), number(12.5, "$"), number(1234567.891), number(-2500),
            number(1250, suffix="%"), number(999.999)] == [
        "$1,297.87", "$1,297.80", "$12.50", "1,234,567.89", "-2,500", "1,250%", "1,000"]
    series = {"vision": [(T0, 1297.87), (T0 + timedelta(hours=1), 2000.0)]}
    chart = figures.cost_over_time(series, "team", "hour", 3600)
    assert chart.figures["rows"] == [["vision", "$2,000.00 at 2026-11-29 10:00:00", "$1,297.87 at 2026-11-29 09:00:00",
                                      "$2,000.00 at 2026-11-29 10:00:00", "$3,297.87"]]
    assert chart.as_json()["figures"] == chart.figures  # what qm.js writes at a live update
    samples = [{"at": T0 + timedelta(minutes=i), "pending_by_priority": {"research": n}, "pending_by_team": {}}
               for i, n in enumerate([1250, 40])]
    queue = figures.queue_depth(samples, ["research"]).figures
    assert queue["rows"][0][1:] == ["40 at 2026-11-29 09:01:00", "40 at 2026-11-29 09:01:00",
                                    "1,250 at 2026-11-29 09:00:00"]


def test_a_heat_map_says_each_nodes_slots_by_holder_and_links_its_jobs() -> None:
    rows = [NodeRow(id=1, name="n1", pool="h100", leaf_switch="l", spine="s", state="ready", gpu_type="H100-80GB",
                    capacity_tier="reserved", slots=(Slot("vision", 7, team_id=1), Slot("vision", 7, team_id=1), None, None)),
            NodeRow(id=2, name="n2", pool="h100", leaf_switch="l", spine="s", state="cordoned", gpu_type="H100-80GB",
                    capacity_tier="reserved", slots=(Slot("language", None, team_id=2), None, None, None))]
    table = figures.fleet_heatmap(rows).figures
    assert table["columns"] == ["node (pool / name)", "GPU slots by holder", "jobs on it"]
    # The jobs a click on a cell opens, each a link to its page; a job the viewer may not read, none.
    assert table["rows"] == [["h100 / n1", "free 2, vision 2", [{"text": "job 7", "href": "/jobs/7/"}, " (2 GPUs)"]],
                             ["h100 / n2", "away 3, language 1", "–"]]
    cell = figure_cell(table["rows"][0][2])
    assert cell == '<a href="/jobs/7/">job 7</a> (2 GPUs)', cell


def test_bars_over_categories_say_every_bar() -> None:
    chart = figures.quota_usage("H100-80GB", [
        {"team": "vision", "nominal": 40, "used": 48, "borrowed": 8, "lent": 0},
        {"team": "language", "nominal": 24, "used": 10, "borrowed": 0, "lent": 8}])
    assert chart.figures == {"columns": ["team", "quota", "used", "borrowed", "lent"],
                             "rows": [["vision", "40", "48", "8", "0"], ["language", "24", "10", "0", "8"]]}


def test_horizontal_bars_say_their_categories_with_the_axis_unit() -> None:
    rows = [{"name": "vision", "is_total": False, "is_idle": False, "cost_usd": 12.5, "cost_productive_usd": 10.0,
             "cost_active_only_usd": 2.0, "cost_allocated_only_usd": 0.5},
            {"name": "", "is_total": False, "is_idle": True, "cost_usd": 3.25, "cost_productive_usd": 0,
             "cost_active_only_usd": 0, "cost_allocated_only_usd": 0}]
    table = figures.cost_breakdown(rows, "team").figures
    assert table["columns"] == ["team", "productive", "active, not productive", "allocated, idle on the device",
                                "capacity no job held"]
    assert table["rows"] == [["vision", "$10.00", "$2.00", "$0.50", "$0.00"],
                             ["no job (idle capacity)", "$0.00", "$0.00", "$0.00", "$3.25"]]


def test_a_time_series_says_each_series_latest_lowest_and_highest_with_their_times() -> None:
    samples = [{"at": T0 + timedelta(minutes=i), "stranded_gpus": s, "allocated_gpus": 0, "total_gpus": 16,
                "unavailable_gpus": 0, "reserved_gpus": 0} for i, s in enumerate([3, 7, 1, 4])]
    table = figures.stranded_gpus(samples).figures
    assert table["columns"] == ["series", "latest (UTC)", "lowest (UTC)", "highest (UTC)"]
    assert table["rows"][0] == ["stranded GPUs", "4 at 2026-11-29 09:03:00", "1 at 2026-11-29 09:02:00",
                                "7 at 2026-11-29 09:01:00"]
    assert [row[0] for row in table["rows"]] == ["stranded GPUs", "free GPUs", "held for a reservation"]


def test_bars_over_time_also_say_their_total() -> None:
    series = {"vision": [(T0, 1.5), (T0 + timedelta(hours=1), 2.25)], "language": [(T0, 4.0)]}
    table = figures.cost_over_time(series, "team", "hour", 3600).figures
    assert table["columns"][-1] == "total"
    assert table["rows"] == [["language", "$4.00 at 2026-11-29 09:00:00", "$4.00 at 2026-11-29 09:00:00",
                              "$4.00 at 2026-11-29 09:00:00", "$4.00"],
                             ["vision", "$2.25 at 2026-11-29 10:00:00", "$1.50 at 2026-11-29 09:00:00",
                              "$2.25 at 2026-11-29 10:00:00", "$3.75"]]


def test_box_plots_say_their_quartiles_and_the_longest_value() -> None:
    stats = [{"team": "vision", "n": 9, "low": 1.0, "q1": 2.0, "median": 3.5, "q3": 5.0, "high": 8.0, "mean": 4.25,
              "max": 30.0}]
    table = figures.distribution_box("waits", "Waits", "caption", "wait (minutes)", stats, "empty",
                                     team_ids={"vision": 1}).figures
    assert table["rows"] == [["vision", "3.5", "2 to 5", "1 to 8", "4.25", "30"]]


def test_a_timeline_says_each_stretch_and_event_as_its_hover_does() -> None:
    segments = [{"state": "pending", "start": T0, "end": T0 + timedelta(minutes=5)},
                {"state": "running", "start": T0 + timedelta(minutes=5), "end": None}]
    events = [{"created_at": T0, "kind": "job.submitted", "reason": "Submitted", "message": "by alice"}]
    table = figures.job_timeline(segments, events, now=T0 + timedelta(minutes=65)).figures
    assert table["rows"] == [
        ["Pending", "Pending from 2026-11-29 09:00:00 to 2026-11-29 09:05:00 (5 min)"],
        ["Running", "Running from 2026-11-29 09:05:00 to now (60 min)"],
        ["events", "2026-11-29 09:00:00 · job.submitted · Submitted: by alice"],
    ]


def test_a_chart_with_nothing_to_plot_has_no_figures_and_the_live_json_carries_them() -> None:
    empty = figures.stranded_gpus([])
    assert empty.figures == {"columns": [], "rows": []}
    chart = figures.quota_usage("A100-40GB", [{"team": "vision", "nominal": 8, "used": 2, "borrowed": 0, "lent": 0}])
    assert chart.as_json()["figures"] == chart.figures


def _stranded(minutes: int, step_s: int = 60) -> list[dict]:
    return [{"at": T0 + timedelta(seconds=step_s * i), "stranded_gpus": i % 7, "allocated_gpus": 10, "total_gpus": 16,
             "unavailable_gpus": 0, "reserved_gpus": 0} for i in range(minutes * 60 // step_s + 1)]


def test_a_time_series_offers_each_span_that_holds_a_few_points_and_is_shorter_than_all_it_shows() -> None:
    # An hour, a point a minute: 5 and 15 min; "Last hour" would be all of it.
    chart = figures.stranded_gpus(_stranded(60))
    assert chart.ranges == {"start": "2026-11-29 09:00:00", "end": "2026-11-29 10:00:00",
                            "spans": [["Last 5 min", 300], ["Last 15 min", 900]]}
    assert chart.as_json()["ranges"] == chart.ranges  # what qm.js keeps at a live update
    # 30 days thinned to a point every 2.5 h: no span of a handful of points or fewer.
    month = figures.stranded_gpus(_stranded(30 * 24 * 60, step_s=9000))
    assert month.ranges is not None
    assert month.ranges["spans"] == [["Last 24 h", 86400], ["Last 7 days", 604800]]
    # A loop silent up to now: "All" reaches the grey stretch's end, and so does each span.
    silent = figures.stranded_gpus(_stranded(60), until=T0 + timedelta(minutes=90))
    assert silent.ranges is not None and silent.ranges["end"] == "2026-11-29 10:30:00"
    # Bars over time: the last bar's whole bucket.
    cost = figures.cost_over_time({"vision": [(T0 + timedelta(hours=h), 1.0) for h in range(30)]}, "team", "hour", 3600)
    assert cost.ranges == {"start": "2026-11-29 09:00:00", "end": "2026-11-30 15:00:00",
                           "spans": [["Last 6 h", 21600], ["Last 24 h", 86400]]}


def test_bars_of_one_bucket_offer_no_span_shorter_than_a_few_of_their_buckets() -> None:
    # Demo walk, 6 Dec: the showback's month of one day's bar (and today's one hour's) offered
    # "Last 5 min" to "Last 6 h", each a sliver of the one bar: no step between bars to measure.
    day = figures.cost_over_time({"vision": [(T0, 50.65)]}, "project", "day", 86400)
    assert day.ranges == {"start": "2026-11-29 09:00:00", "end": "2026-11-30 09:00:00", "spans": []}
    hour = figures.cost_over_time({"vision": [(T0, 9.0)], "language": [(T0, 4.0)]}, "team", "hour", 3600)
    assert hour.ranges is not None and hour.ranges["spans"] == []
    # Days of a month: a week is a span (at least four bars), a day or less is not.
    month = figures.cost_over_time({"vision": [(T0 + timedelta(days=d), 1.0) for d in range(20)]}, "team", "day", 86400)
    assert month.ranges is not None and month.ranges["spans"] == [["Last 7 days", 604800]]


def test_only_a_time_series_has_time_ranges_and_values_at_each_point() -> None:
    others = [figures.quota_usage("H100-80GB", [{"team": "vision", "nominal": 8, "used": 2, "borrowed": 0, "lent": 0}]),
              figures.job_timeline([{"state": "running", "start": T0, "end": None}], [], now=T0 + timedelta(minutes=5)),
              figures.stranded_gpus([])]
    for chart in others:
        assert chart.ranges is None and chart.values is None, chart.key
        assert chart.as_json()["ranges"] is None and chart.as_json()["values"] is None


def test_a_time_series_says_its_value_at_each_point_newest_first_as_the_figures_say_numbers() -> None:
    samples = [{"at": T0 + timedelta(minutes=i), "oldest_feasible_pending_s": s} for i, s in enumerate([90.0, None, 75000.0])]
    table = figures.oldest_feasible_wait(samples).values
    assert table == {"columns": ["time (UTC)", "oldest feasible wait"],
                     "rows": [["2026-11-29 09:02:00", "1,250"], ["2026-11-29 09:01:00", "–"], ["2026-11-29 09:00:00", "1.5"]],
                     "shown": 100}
    # Bars: each bucket's start, each group's dollars to the cent; a group with no bar there, "–".
    series = {"vision": [(T0, 1297.875), (T0 + timedelta(hours=1), 2.0)], "language": [(T0, 4.0)]}
    cost = figures.cost_over_time(series, "team", "hour", 3600)
    assert cost.values == {"columns": ["hour (UTC)", "language", "vision"],
                           "rows": [["2026-11-29 10:00:00", "–", "$2.00"], ["2026-11-29 09:00:00", "$4.00", "$1,297.88"]],
                           "shown": 100}
    assert cost.as_json()["values"] == cost.values  # what qm.js writes at a live update
