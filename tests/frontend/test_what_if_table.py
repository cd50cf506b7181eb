"""The what-if result's summary table says the same numbers as its charts."""

from __future__ import annotations

from datetime import datetime, timezone

from django.template.loader import render_to_string

from frontend.replay_worker import Replay
from frontend.views.whatif import replay_charts


def test_a_small_allocation_is_not_rounded_to_zero_and_matches_the_chart():
    runs = [("live policy", {"allocated": 0.0047, "offered_load": 0.0454, "wait_mean_min": 0.3, "wait_max_min": 6.1,
                             "stranded_gpus": 0.03, "jobs_done": 129, "jobs_total": 175}),
            ("what-if", {"allocated": 0.93456, "offered_load": 0.0454, "wait_mean_min": 0.3, "wait_max_min": 6.6,
                         "stranded_gpus": 0.14, "jobs_done": 131, "jobs_total": 175})]
    replay = Replay(days=1, jobs=175, nodes=16, gpus=128, runs=runs, seconds=1.1,
                    at=datetime(2026, 11, 29, 18, 5, tzinfo=timezone.utc), teams=[{}, {}])
    charts = replay_charts(replay)
    html = render_to_string("frontend/_what_if_result.html", {"state": {"state": "done"}, "result": replay,
                                                              "charts": charts})
    row = html.split('<th scope="row">allocated</th>', 1)[1].split("</tr>", 1)[0]
    assert "<td>0.47%</td>" in row and "<td>93.46%</td>" in row, row
    allocation = next(c for c in charts if c.key == "allocation").figure["data"]
    assert [trace["text"][0] for trace in allocation] == ["0.47%", "93.46%"]  # the chart's own labels


def test_the_legend_names_each_run_short_and_the_hover_says_it_in_full():
    """Plotly's legend does not wrap: a run's full label (its policy and every quota change)
    was cut off at the chart's edge. The legend says which run; the hover and the table say
    the whole policy."""
    full = ("what-if (spread, backfill on, preemption on, quotas changed: language A100-40GB 16 → none; "
            "vision H100-80GB 40 → 64)")
    runs = [("live policy (pack, backfill on, preemption on, live quotas)", {"allocated": 0.5, "offered_load": 0.6}),
            (full, {"allocated": 0.4, "offered_load": 0.6})]
    replay = Replay(days=1, jobs=1, nodes=1, gpus=8, runs=runs, seconds=0.1,
                    at=datetime(2026, 11, 29, 18, 5, tzinfo=timezone.utc), teams=[{}, {}])
    allocation = next(c for c in replay_charts(replay) if c.key == "allocation").figure["data"]
    assert [t["name"] for t in allocation] == ["live policy", "what-if"]
    assert full in allocation[1]["hovertemplate"]
    html = render_to_string("frontend/_what_if_result.html", {"state": {"state": "done"}, "result": replay,
                                                              "charts": []})
    assert "vision H100-80GB 40 → 64" in html  # the table's header keeps the whole label
