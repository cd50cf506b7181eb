"""Plotly figures as plain dicts, built from what the readers in `frontend/` return.

Every builder returns a `Chart`: a title, axis titles with units, a one-line caption and, when
there is nothing to plot yet, an empty-state sentence saying what will appear. Builders query
nothing and decide nothing: they only lay out numbers they are given. The browser draws the
dicts with plotly.js (served from our own static route, see `views/vendor.py`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone

from controlplane.choices import STATE_COLOURS, JobState, NodeState
from controlplane.services import percent_text
from controlplane.services.cycle import SAMPLE_EVERY_S
from frontend.chart_figures import figures_table, time_range, values_table
from frontend.templatetags.qm import duration, said, utc
from scheduler_core.sentences import gpu_hours

# Okabe–Ito, then Tableau: distinguishable, colour-blind-friendly for the first eight teams.
TEAM_PALETTE = (
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
    "#4E79A7", "#F28E2B", "#59A14F", "#B07AA1", "#76B7B2", "#EDC948", "#FF9DA7", "#9C755F",
)
FREE_COLOUR = "#f1f3f5"
UNAVAILABLE_COLOUR = "#adb5bd"
HIGHLIGHT_COLOUR = "#c92a2a"
TIER_COLOURS = {"allocated": "#1c7ed6", "active": "#f08c00", "productive": "#2b8a3e"}
#: Line widths of the tiers' lines over time, each drawn over the one before: a tier equal to the
#: one above it (a healthy fleet's productive and active, most minutes) hid it wholly at one width.
TIER_WIDTHS = {"allocated": 6.0, "active": 4.0, "productive": 2.0}
#: Every chart's hover label: the page's ink (--ink) on white, framed in its grey.
HOVER_LABEL = {"bgcolor": "#ffffff", "bordercolor": "#495057", "font": {"color": "#212529"}}
#: The hover of bars that have no hover text of their own: every bar at the pointer's category in
#: one box, each named in the label's ink beside its colour (bars across the chart: "y unified").
#: Plotly's one-bar label wrote the bar's name beside it in the bar's own colour, on white: the
#: amber of pending 2.27:1, the quota's grey 2.07 (unreadable wherever the colour was light).
BARS_HOVER = "x unified"


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    caption: str
    figure: dict[str, Any]
    empty: str = ""
    height: int = 320
    notes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def figures(self) -> dict[str, Any]:
        """The chart's numbers as a table: its text alternative (`chart_figures`)."""
        return figures_table(self.figure)

    @property
    def ranges(self) -> dict[str, Any] | None:
        """A time series' spans for its range buttons (`chart_figures.time_range`), else None."""
        return None if self.empty else time_range(self.figure)

    @property
    def values(self) -> dict[str, Any] | None:
        """A time series' value at each point, newest first (`chart_figures.values_table`), else None."""
        return None if self.empty else values_table(self.figure)

    def as_json(self) -> dict[str, Any]:
        return {"key": self.key, "title": self.title, "caption": self.caption, "figure": self.figure,
                "empty": self.empty, "figures": self.figures, "ranges": self.ranges, "values": self.values}


def ts(at: datetime) -> str:
    """A time as plotly's date axis reads it: UTC, no offset suffix."""
    return timezone.localtime(at, timezone.get_fixed_timezone(0)).strftime("%Y-%m-%d %H:%M:%S")


#: A name the chart cannot tie to a team (a team deleted since a sample named it).
NO_TEAM_COLOUR = "#868e96"


def team_colour(team_id: int) -> str:
    """A team's colour on every chart of every page: its id picks it, so the same team keeps its
    colour whichever other teams a chart shows, and a new team never repaints the others. (Ranking
    the names a chart happens to show gave one team two colours on the same page.)"""
    return TEAM_PALETTE[(team_id - 1) % len(TEAM_PALETTE)]


def team_colours(team_ids: Mapping[str, int]) -> dict[str, str]:
    """`team_colour` for each team name (name → id)."""
    return {name: team_colour(team_id) for name, team_id in team_ids.items()}


def group_colours(names: Iterable[str]) -> dict[str, str]:
    """One colour per group name of one chart (projects, priority classes), in name order."""
    return {name: TEAM_PALETTE[i % len(TEAM_PALETTE)] for i, name in enumerate(sorted(set(names)))}


def _layout(title: str, x_title: str, y_title: str, *, height: int = 320, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0.0, "xanchor": "left", "font": {"size": 15}},
        "xaxis": {"title": {"text": x_title}, "automargin": True},
        "yaxis": {"title": {"text": y_title}, "automargin": True, "rangemode": "tozero"},
        "margin": {"l": 60, "r": 20, "t": 44, "b": 90},
        "height": height,
        # Shown even for one trace (plotly's default hides a lone trace's legend): one node state,
        # one priority class or one pool is still a colour the reader must be told. Charts whose
        # colours say nothing (heat map, box plots) turn it off.
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0.0, "y": 0.0, "yref": "container", "yanchor": "bottom"},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        # Hover labels in the page's ink on white (HOVER_LABEL). Plotly's own filled each with its
        # trace's colour and wrote on it in white or #444, whichever it judged lighter, under 4.5:1
        # on most of them (white on the borrowed orange 3.58:1, #444 on pending's amber 4.30).
        "hoverlabel": HOVER_LABEL,
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(layout.get(key), dict):
            layout[key] = {**layout[key], **value}
        else:
            layout[key] = value
    return layout


def _figure(data: list[dict[str, Any]], layout: dict[str, Any]) -> dict[str, Any]:
    return {"data": _as_typed(data), "layout": _as_typed(layout)}


def _as_typed(value: Any) -> Any:
    """Every string of a figure as Plotly shows it typed: `<` written `&lt;` (Plotly turns it
    back into the character), except the line breaks and hover boxes the charts draw themselves
    (`<br>`, `<extra></extra>`). Plotly reads `<a href>`, `<span style>`, `<b>` in any label,
    legend or hover text as markup, so a job's name, a reason or a pool with one in it was a
    link in the chart (until 6 Dec: tests/frontend/test_chart_text_no_markup.py)."""
    kind = type(value)
    if kind is str:
        if value.count("<") == value.count("<br>") + value.count("<extra>") + value.count("</extra>"):
            return value  # none, or only the charts' own (a heat map's every cell): no copy
        return (value.replace("<", "&lt;").replace("&lt;br>", "<br>")
                .replace("&lt;extra>", "<extra>").replace("&lt;/extra>", "</extra>"))
    if kind is list:
        return [v if type(v) in _NO_TEXT else _as_typed(v) for v in value]
    if kind is dict:
        return {k: v if type(v) in _NO_TEXT else _as_typed(v) for k, v in value.items()}
    return value


_NO_TEXT = frozenset({int, float, bool, type(None)})


def _empty(key: str, title: str, caption: str, x_title: str, y_title: str, empty: str, height: int = 320, *,
           category: str = "") -> Chart:
    """A chart with nothing to plot yet: its axes as they will be (`category`: "x" or "y" lists
    names, not numbers), and the sentence saying what will appear."""
    extra: dict[str, Any] = {f"{category}axis": {"type": "category"}} if category else {}
    return Chart(key, title, caption, _figure([], _layout(title, x_title, y_title, height=height, **extra)),
                 empty=empty, height=height)


def _stride_note(samples: Sequence[Mapping[str, Any]]) -> str:
    if len(samples) < 2:
        return ""
    span = (samples[-1]["at"] - samples[0]["at"]).total_seconds()
    step = span / (len(samples) - 1)
    if step < 90:
        return f" One point every {step:.0f} s."
    if step < 5400:
        return f" One point every {step / 60:.0f} min."
    return f" One point every {step / 3600:.1f} h."


# ----------------------------------------------------------------------------- the overview


#: A stretch between two points of a cycle-sample series more than this many times the series'
#: own step had no scheduling cycle: the scheduler was down, restarting or stuck.
GAP_FACTOR = 2.0
GAP_COLOUR = "#dee2e6"


def _median(values: Sequence[float]) -> float:
    return sorted(values)[len(values) // 2]


def sample_step_s(samples: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """The series' own step: (between two drawn points, between two stored samples). Samples are
    stored one per cycle at most every SAMPLE_EVERY_S, so a stored sample's step is the median
    time between them per stored sample, never less than that; a window thinned to every n-th
    sample (fleet_series: ids n apart) draws a point every n of them."""
    pairs = list(zip(samples[:-1], samples[1:], strict=True))
    strides = [b.get("id", 0) - a.get("id", 0) for a, b in pairs]
    stride = _median(strides) if all(n > 0 for n in strides) else 1
    per_sample = max(_median([(b["at"] - a["at"]).total_seconds() for a, b in pairs]) / stride, SAMPLE_EVERY_S)
    return per_sample * stride, per_sample


def cycle_gaps(samples: Sequence[Mapping[str, Any]], until: datetime | None = None) -> list[tuple[datetime, datetime]]:
    """Stretches with no cycle sample: consecutive points further apart than GAP_FACTOR times
    the series' own step (`sample_step_s`). A line drawn step-wise across such a stretch holds
    the last value, as if the fleet had stood still while nobody looked. With `until` (the
    window's end: now), a loop silent since the last sample is such a stretch too, up to it:
    the last point is the newest sample, so the next was due within one stored sample's step."""
    if len(samples) < 3:
        return []
    drawn_step, stored_step = sample_step_s(samples)
    gaps = [(a["at"], b["at"]) for a, b in zip(samples[:-1], samples[1:], strict=True)
            if (b["at"] - a["at"]).total_seconds() > GAP_FACTOR * drawn_step]
    last = samples[-1]["at"]
    if until is not None and (until - last).total_seconds() > GAP_FACTOR * stored_step:
        gaps.append((last, until))
    return gaps


#: A count axis (jobs, GPUs) whose highest value is at most this is ticked at every whole number:
#: over so short a range plotly ticks every 0.2 or 0.5, and read "0.2 pending jobs", "0.5 GPUs".
WHOLE_TICKS_UP_TO = 5


def _highest(data: Sequence[Mapping[str, Any]]) -> float:
    """The highest value `data` draws on its value axis: a stack's (stackgroup) sum at each
    point, any other trace's own highest."""
    highest = 0.0
    stacks: dict[str, dict[int, float]] = {}
    for trace in data:
        values = [v for v in trace.get("y", ()) if v is not None]
        if trace.get("stackgroup") or trace.get("type") == "bar":
            stack = stacks.setdefault(str(trace.get("stackgroup", "bars")), {})
            for i, v in enumerate(trace.get("y", ())):
                stack[i] = stack.get(i, 0.0) + float(v or 0)
        elif values:
            highest = max(highest, max(float(v) for v in values))
    for stack in stacks.values():
        highest = max(highest, *stack.values(), 0.0)
    return highest


def _whole_ticks(layout: dict[str, Any], data: Sequence[Mapping[str, Any]], axis: str = "yaxis") -> None:
    """Tick a count axis at whole numbers while its values are small (`WHOLE_TICKS_UP_TO`); above
    that plotly's own ticks are whole already."""
    if _highest(data) <= WHOLE_TICKS_UP_TO:
        layout[axis] = {**layout.get(axis, {}), "tick0": 0, "dtick": 1}


def _time_series(key: str, title: str, caption: str, y_title: str, samples: Sequence[Mapping[str, Any]],
                 empty: str, traces: Callable[[list[str]], list[dict[str, Any]]], *, stride_note: bool = True,
                 mark_gaps: bool = True, until: datetime | None = None, counts: bool = False,
                 **layout: Any) -> Chart:
    """A chart over time, one point per sample (`samples[i]["at"]`): the shared frame of every
    time series. `traces(x)` lays out the data on the x values; `layout` adds to the frame.
    With `mark_gaps` (cycle samples), stretches with no cycle are shaded grey and the caption
    says so; with `until` (the window's end), so is a stretch from the last sample up to it.
    `counts`: the values are whole numbers (jobs, GPUs), ticked as such (`_whole_ticks`)."""
    x_title = "time (UTC)"
    if not samples:
        return _empty(key, title, caption, x_title, y_title, empty)
    x = [ts(s["at"]) for s in samples]
    frame = _layout(title, x_title, y_title, hovermode="x unified", xaxis={"type": "date"}, **layout)
    note = _stride_note(samples) if stride_note else ""
    gaps = cycle_gaps(samples, until) if mark_gaps else []
    if gaps:
        frame["shapes"] = [
            {"type": "rect", "xref": "x", "yref": "paper", "x0": ts(start), "x1": ts(end), "y0": 0, "y1": 1,
             "fillcolor": GAP_COLOUR, "opacity": 0.6, "line": {"width": 0}, "layer": "below"}
            for start, end in gaps
        ]
        note += " Grey: no scheduling cycle ran (each line holds its last value across it)."
        if until is not None and gaps[-1][1] == until:
            note += f" None has run since {ts(gaps[-1][0])} UTC."
    data = traces(x)
    if counts:
        _whole_ticks(frame, data)
    return Chart(key, title, caption + note, _figure(data, frame))


NO_CYCLE_YET = "No scheduling cycle has run in this window yet. "
#: Older samples count a team's pending jobs but not by class; the chart shows them as this.
UNCLASSIFIED = "all classes (older samples)"


def _ordered_classes(seen: set[str], priority_order: Sequence[str]) -> list[str]:
    return [n for n in priority_order if n in seen] + sorted(seen - set(priority_order))


def class_colours(names: Iterable[str], priority_order: Sequence[str]) -> dict[str, str]:
    """A colour per priority class: the palette's colour of its place in the fleet's priority
    order (a class no longer in it after them all, by name), so a class keeps its colour whichever
    classes a window shows. The queue stacks its classes as filled areas, where colour alone tells
    them apart; Plotly's own cycle gave them red beside green, by the classes that had waited."""
    order = [*priority_order, *sorted(set(names) - set(priority_order))]
    return {name: TEAM_PALETTE[order.index(name) % len(TEAM_PALETTE)] for name in names}


def queue_depth(samples: Sequence[Mapping[str, Any]], priority_order: Sequence[str], team: str | None = None,
                *, until: datetime | None = None) -> Chart:
    """Pending jobs per cycle, stacked by priority class (highest at the bottom): the whole
    fleet's, or one team's (`pending_by_team_priority`). A sample stored before per-team
    classes were recorded gives only the team's total; it is stacked as one grey series."""
    title = "Queue depth by priority class" if team is None else f"Queue depth of team {team} by priority class"
    caption = (
        "Jobs waiting at each scheduling cycle"
        + ("" if team is None else f" that belong to team {team}") + ", stacked by priority class (highest at the bottom)."
    )

    def per_class(s: Mapping[str, Any]) -> Mapping[str, int]:
        if team is None:
            return s["pending_by_priority"] or {}
        return (s.get("pending_by_team_priority") or {}).get(team) or {}

    def unclassified(s: Mapping[str, Any]) -> int:
        """The team's pending jobs of a sample that has no per-class counts for teams."""
        if team is None or s.get("pending_by_team_priority"):
            return 0
        return int((s["pending_by_team"] or {}).get(team, 0))

    def traces(x: list[str]) -> list[dict[str, Any]]:
        ordered = _ordered_classes({name for s in samples for name in per_class(s)}, priority_order)
        colours = class_colours(ordered, priority_order)
        data = [
            {"type": "scatter", "mode": "lines", "name": name, "x": x, "stackgroup": "pending",
             "y": [int(per_class(s).get(name, 0)) for s in samples],
             "line": {"shape": "hv", "color": colours[name]}}
            for name in ordered
        ]
        old = [unclassified(s) for s in samples]
        if any(old):
            data.append({"type": "scatter", "mode": "lines", "name": UNCLASSIFIED, "x": x, "stackgroup": "pending",
                         "y": old, "line": {"shape": "hv", "color": "#adb5bd"}})
        if not data:
            data = [{"type": "scatter", "mode": "lines", "name": "all classes", "x": x,
                     "y": [0 for _ in samples], "line": {"shape": "hv", "color": "#868e96"}}]
        return data

    return _time_series("queue", title, caption, "pending jobs", samples,
                        NO_CYCLE_YET + "Once the scheduler runs, the number of waiting jobs per priority class "
                        "appears here, one point per cycle.", traces, until=until, counts=True)


def utilization_tiers(points: Sequence[Mapping[str, Any]], *, source_note: str = "",
                      window_end: datetime | None = None) -> Chart:
    """Allocated, active and productive GPU time as % of fleet capacity, per interval."""
    caption = (
        "Share of the fleet's GPU time that was allocated to a job, active on the device, and "
        "productive (kept progress at the job's fault-free rate); each tier is at most the one above."
        + source_note
    )
    return _tier_steps("utilization", "Utilization in three tiers", caption, "% of fleet GPU-time", points,
                       "No usage recorded in this window yet. Once jobs run and agents report, the allocated, "
                       "active and productive shares of the fleet appear here.", window_end)


def node_utilization_tiers(points: Sequence[Mapping[str, Any]], node: str, *, source_note: str = "",
                           window_end: datetime | None = None) -> Chart:
    """One node's allocated, active and productive GPU time as % of its own capacity, per
    interval (services/node_tiers.py)."""
    caption = (
        f"Share of {node}'s GPU time that was allocated to a job, active on the device (allocated and not "
        "stalled, as its agent reported), and productive (active and making kept progress); each tier is at "
        "most the one above." + source_note
    )
    return _tier_steps("node_tiers", f"Utilization of {node} in three tiers", caption, f"% of {node}'s GPU-time",
                       points,
                       f"No usage of {node} recorded in this window yet. Once jobs run on it and its agent "
                       "reports, the allocated, active and productive shares of its GPUs appear here.", window_end)


def drawn_to_rollup(start: datetime, end: datetime, window_end: datetime) -> str:
    """The range a chart read from the rollups draws, said: its window starts at now − 24 h, but it
    ends at the last accounting rollup, short of the window's end (now) by what is not rolled up
    yet. Said as showback's page says what it covers, so "24 hours" is not read as the span."""
    note = f" Drawn from {utc(start)} to {utc(end)}"
    short = (window_end - end).total_seconds()
    if short >= 0.5:
        return note + (f": up to the last accounting rollup, {duration(short)} before the window's end at "
                       f"{utc(window_end)} (not rolled up yet).")
    return note + "."


def _tier_steps(key: str, title: str, caption: str, y_title: str, points: Sequence[Mapping[str, Any]],
                empty: str, window_end: datetime | None = None) -> Chart:
    """The three tiers as steps, shares of a capacity (the overview's and the node page's chart).

    Each value holds from its bucket's start to the next one's (a step). A point that says
    where its bucket ends (`until`) closes the last step there: otherwise the newest bucket is
    only the top of a vertical line, and a window's only bucket (a fleet's first hour under
    *24 hours*, its first day under *30 days*) a lone point that plotly draws as nothing."""
    last = points[-1] if points else None
    if last is not None and last.get("until") is not None and last["until"] > last["at"]:
        points = [*points, {**last, "at": last["until"]}]
    # A point with no tiers (None: no capacity there) is a gap. Plotly draws no step into a gap,
    # so the step before it is closed where the gap begins, or its bucket would draw as nothing.
    tiers = ("allocated", "active", "productive")
    gapped = [i for i in range(1, len(points)) if all(points[i].get(t) is None for t in tiers)
              and any(points[i - 1].get(t) is not None for t in tiers)]
    for i in reversed(gapped):
        points = [*points[:i], {**points[i - 1], "at": points[i]["at"]}, *points[i:]]

    def traces(x: list[str]) -> list[dict[str, Any]]:
        return [
            {"type": "scatter", "mode": "lines", "name": tier, "x": x,
             "y": [None if p.get(tier) is None else round(100.0 * float(p[tier]), 2) for p in points],
             "line": {"color": TIER_COLOURS[tier], "shape": "hv", "width": TIER_WIDTHS[tier]}}
            for tier in ("allocated", "active", "productive") if any(p.get(tier) is not None for p in points)
        ]

    caption += " Where two tiers are equal, the higher one shows as a rim around the lower."
    if any(all(p.get(t) is None for t in tiers) for p in points):
        caption += (" A gap is a stretch with no GPU capacity (every node retired, deleted or not yet joined): "
                    "there was nothing to use, not an idle fleet.")
    if points and window_end is not None:
        caption += drawn_to_rollup(points[0]["at"], points[-1]["at"], window_end)
    return _time_series(key, title, caption, y_title, points, empty, traces, stride_note=False, mark_gaps=False,
                        yaxis={"range": [0, 100], "ticksuffix": "%"})


def stranded_gpus(samples: Sequence[Mapping[str, Any]], *, until: datetime | None = None) -> Chart:
    def traces(x: list[str]) -> list[dict[str, Any]]:
        return [
            {"type": "scatter", "mode": "lines", "name": "stranded GPUs", "x": x,
             "y": [s["stranded_gpus"] for s in samples], "line": {"color": "#e8590c", "shape": "hv"}, "fill": "tozeroy"},
            {"type": "scatter", "mode": "lines", "name": "free GPUs", "x": x,
             "y": [max(0, s["total_gpus"] - s["allocated_gpus"] - s["unavailable_gpus"]) for s in samples],
             "line": {"color": "#868e96", "dash": "dot", "shape": "hv"}},
            {"type": "scatter", "mode": "lines", "name": "held for a reservation", "x": x,
             "y": [s.get("reserved_gpus", 0) for s in samples], "line": {"color": "#1971c2", "dash": "dash", "shape": "hv"}},
        ]

    return _time_series("stranded", "Stranded GPUs",
                        "Idle GPUs on partly used ready nodes, counted while a job that needs a whole node waits: "
                        "capacity that exists but cannot start that job. GPUs held idle for a waiting job's "
                        "reservation count too (as in /metrics and the fragmentation API); the dashed line is "
                        "how many idle GPUs were so held (nodes draining for a gang; samples before 30 Nov "
                        "2026 did not keep it and read 0).", "GPUs", samples,
                        NO_CYCLE_YET + "Stranded GPUs per cycle appear here.", traces, until=until, counts=True)


#: Line dashes of the pools' lines, in the pools' name order.
POOL_DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


def largest_free_block(samples: Sequence[Mapping[str, Any]], fleet_pools: Sequence[str] = (), *,
                       until: datetime | None = None) -> Chart:
    """One line per pool: the pools the samples name and `fleet_pools` (the fleet's pools now).
    A cycle's sample names only pools with a ready node; a pool it leaves out had none, so it
    could start nothing there: 0, not a gap."""
    pools = sorted({p for s in samples for p in (s["largest_free_block_by_pool"] or {})} | set(fleet_pools))

    def traces(x: list[str]) -> list[dict[str, Any]]:
        # Pools often read the same (8 and 8 while each has a free node, 0 and 0 when full): each
        # after the first is dashed in its own pattern, so a line drawn over another shows it
        # through its gaps (one style for all hid the first pools wholly under the last).
        return [
            {"type": "scatter", "mode": "lines", "name": pool, "x": x,
             "line": {"shape": "hv", "dash": POOL_DASHES[i % len(POOL_DASHES)]},
             "y": [(s["largest_free_block_by_pool"] or {}).get(pool, 0) for s in samples]}
            for i, pool in enumerate(pools)
        ]

    chart = _time_series("free_block", "Largest free block per pool",
                         "Most free GPUs on any one ready node of each pool: the largest single-node job that could "
                         "start there now.", "GPUs on one node", samples,
                         NO_CYCLE_YET + "The largest free block of each pool appears here.", traces, until=until,
                         counts=True)
    if samples and not pools:
        return dataclasses.replace(chart, empty="No ready node had a free GPU in this window. The largest free block "
                                   "of each pool appears here when one has.")
    return chart


def from_first_gpu(chart: Chart, began: datetime | None) -> Chart:
    """A chart of the fleet's GPUs drawn from the first cycle that counted one
    (`fleet_series.since_the_fleet_had_gpus`): its caption says so, so a chart that starts later
    than the queue's beside it is not read as a stretch missing."""
    if began is None or chart.empty:
        return chart
    return dataclasses.replace(chart, caption=chart.caption + f" The fleet had no GPU before {ts(began)} UTC: "
                               "nothing drawn before.")


def oldest_feasible_wait(samples: Sequence[Mapping[str, Any]], *, until: datetime | None = None) -> Chart:
    def traces(x: list[str]) -> list[dict[str, Any]]:
        y = [None if s["oldest_feasible_pending_s"] is None else round(s["oldest_feasible_pending_s"] / 60.0, 2)
             for s in samples]
        return [{"type": "scatter", "mode": "lines", "name": "oldest feasible wait", "x": x, "y": y,
                 "connectgaps": False, "line": {"color": "#d9a400", "shape": "hv"}}]

    return _time_series("oldest", "Age of the oldest feasible pending job",
                        "How long the longest-waiting job that can run on this fleet has waited, per cycle; jobs that "
                        "can never run are left out.", "wait (minutes)", samples,
                        NO_CYCLE_YET + "The oldest feasible job's wait appears here.", traces, showlegend=False,
                        until=until)


#: Height of one category's label in a heat map's colour bar, in pixels.
COLOURBAR_LABEL_PX = 40
#: A colour-bar label's width per character, in pixels: plotly's 12 px tick font at 0.6 em, as
#: qm.js (slotAxisPx) reckons it (Chromium draws about 5.4: the room is never short).
COLOURBAR_CHAR_PX = 7.2
#: The colour bar's own width besides its labels: its 30 px bar, 10 px padding, the tick and the
#: right edge's 15 px (qm.js's reckoning too).
COLOURBAR_BAR_PX = 30 + 10 + 3 + 15
#: The categories a heat map's colour bar may show besides the teams.
#: A slot's category on a node that takes no work: its idle GPUs are away, not free, as `qm sinfo`
#: (AWAY), the overview's tile and the Nodes page say. Until 7 Dec the bar said "node takes no
#: work", and a cordon widened the bar's room by those words (the map's cells jumped).
AWAY = "away"
HEATMAP_STATES = ("free", AWAY)


def colour_bar_room(words: Iterable[str]) -> int:
    """The right margin a heat map keeps for its colour bar: room for the longest of `words` (every
    category it may show, not only those shown now), so the plot keeps its width when one comes or
    goes (a node cordoned, a team's first job) and its cells do not jump at a live update."""
    return math.ceil(COLOURBAR_BAR_PX + COLOURBAR_CHAR_PX * max((len(w) for w in words), default=0))


def _takes_work(row: Any) -> bool:
    """A heat-map row's node takes work now: ready and in no maintenance window (heatmap.NodeRow)."""
    return bool(row.state == NodeState.READY and not getattr(row, "in_maintenance", False))


#: A heat map of at most this many rows ends each with its node's free GPUs, and says so.
FREE_COUNT_ROWS = 160
FREE_COUNT_SAID = "The number at the right of a row is that node's free GPUs (– on a node that takes no work)."


def fleet_heatmap(rows: Sequence[Any], *, key: str = "heatmap", highlight_job: int | None = None,
                  title: str = "Fleet heat map", caption: str | None = None, teams: Iterable[str] = (),
                  retired: int = 0) -> Chart:
    """Nodes (rows) × GPU slots (columns), each held slot coloured by its team, free slots pale,
    slots on unavailable nodes grey; `highlight_job` marks one job's GPUs in red. Each row ends
    with its node's free-slot count, as in seed 001's fragmentation figure ("–" on a node that
    takes no work), which the caption then says (`FREE_COUNT_SAID`, whatever caption the page
    gives: the job and node pages' maps drew the numbers unexplained). `teams`: every team whose
    GPUs the map may show later, for the colour bar's room (`colour_bar_room`). `retired`: the
    retired nodes, which no map draws: with no row, a fleet all retired is said as such."""
    caption = caption or (
        "Every GPU of the fleet: a row per node (grouped by pool and leaf switch), a column per GPU "
        "slot, coloured by the team holding it; pale cells are free, grey cells sit on nodes that "
        "take no work (their idle GPUs are away, not free, as qm sinfo counts them)."
    )
    x_title, y_title = "GPU slot (index on the node)", "node (pool / name)"
    if not rows and retired:
        # Retired nodes are out of the fleet, and their agents are refused until an admin returns
        # them: "no node has registered yet" beside a Nodes page listing them was untrue.
        return _empty(key, title, caption, x_title, y_title,
                      f"Every node of the fleet is retired ({retired}): none takes work or counts in the fleet. "
                      "A node an admin returns to service (the Nodes page, qm nodes return) appears here as a row "
                      "of cells once its agent registers again.", category="y")
    if not rows:
        return _empty(key, title, caption, x_title, y_title,
                      "No node has registered yet. When node agents register, every GPU appears here as a cell.", category="y")
    team_ids = {s.team: s.team_id for r in rows for s in r.slots if s is not None}
    teams_shown = sorted(team_ids)
    colours = team_colours(team_ids)
    width = max(len(r.slots) for r in rows)
    # Each cell's category: free, on a node that takes no work, this job (when highlighting), or
    # its holder's team. Only categories present are coloured and listed in the colour bar.
    cells: list[list[str | None]] = []
    text: list[list[str]] = []
    links: list[list[int | None]] = []
    labels = []
    for r in rows:
        labels.append(f"{r.pool} / {r.name}")
        c_row: list[str | None] = []
        t_row: list[str] = []
        l_row: list[int | None] = []
        for i in range(width):
            if i >= len(r.slots):
                c_row.append(None)
                t_row.append("")
                l_row.append(None)
                continue
            slot = r.slots[i]
            where = f"{r.name} GPU {i} ({r.gpu_type}, {r.leaf_switch}, {getattr(r, 'state_said', r.state)})"
            if slot is None:
                # (a grey cell's hover said "free" beside the caption's "away, not free")
                c_row.append("free" if _takes_work(r) else AWAY)
                t_row.append(f"{where}<br>free" if _takes_work(r) else f"{where}<br>{AWAY}: the node takes no work")
                l_row.append(None)
            else:
                mine = highlight_job is not None and slot.job_id == highlight_job
                c_row.append("this job" if mine else slot.team)
                job = f"job {slot.job_id}" if slot.job_id is not None else "a job of another team"
                t_row.append(f"{where}<br>team {slot.team}, {job}")
                l_row.append(slot.job_id)
        cells.append(c_row)
        text.append(t_row)
        links.append(l_row)
    present = {c for row in cells for c in row if c is not None}
    fixed = [("free", FREE_COLOUR), (AWAY, UNAVAILABLE_COLOUR), ("this job", HIGHLIGHT_COLOUR)]
    ordered = [(name, colour) for name, colour in fixed if name in present]
    ordered += [(t, colours[t]) for t in teams_shown if t in present]
    categories = [name for name, _ in ordered]
    palette = [colour for _, colour in ordered]
    index = {name: i for i, name in enumerate(categories)}
    z = [[None if c is None else index[c] for c in row] for row in cells]
    n = len(categories)
    # A discrete colour scale: category k owns [k/n, (k+1)/n].
    scale: list[list[Any]] = []
    for k, colour in enumerate(palette):
        scale.append([k / n, colour])
        scale.append([(k + 1) / n, colour])
    # The slot axis is on top, its title in the top margin with the chart's: the chart's title
    # is pinned to the top edge and the margin holds both, one above the other. Plotly's default
    # put the title half-way down the margin, across the centred axis title once the chart is
    # narrow (a phone's 390 px: tests/frontend/test_heatmap_titles_apart_browser.py).
    top, bottom = 88, 20
    height = max(260, min(2400, 18 * len(rows) + 110 + top - 70))
    # The colour bar's share of the plot: room for every category's label (40 px each, its title
    # and padding included) however few the rows, or a one-node job page draws "this job" over
    # "free".
    plot_px = height - top - bottom
    bar_len = min(1.0, max(0.3, (COLOURBAR_LABEL_PX * n + 30) / plot_px))
    data: list[dict[str, Any]] = [{
        "type": "heatmap", "z": z, "x": list(range(width)), "y": labels, "text": text,
        "customdata": links, "hoverinfo": "text", "hovertemplate": "%{text}<extra></extra>",
        "colorscale": scale, "zmin": -0.5, "zmax": n - 0.5, "xgap": 2, "ygap": 2,
        "colorbar": {"tickmode": "array", "tickvals": list(range(n)), "ticktext": categories,
                     "title": {"text": "holder"}, "len": bar_len,
                     # at the plot's right edge, in the margin kept for it (not 2 % of the plot's
                     # width further, which a wide plot would push past that margin)
                     "x": 1.0, "xanchor": "left", "xpad": 10, "thickness": 30},
    }]
    if len(rows) <= FREE_COUNT_ROWS:
        caption = f"{caption} {FREE_COUNT_SAID}"
        data.append({
            "type": "scatter", "mode": "text", "x": [width - 0.5 + 0.45] * len(rows), "y": labels,
            # (a grey row's idle GPUs are away, not free: "8" there read as free beside
            # qm sinfo's FREE 0, AWAY 16)
            "text": [str(r.free) if _takes_work(r) else "–" for r in rows], "textposition": "middle right",
            "hoverinfo": "skip",
            "showlegend": False, "cliponaxis": False, "textfont": {"size": 11, "color": "#495057"},
        })
    layout = _layout(
        title, x_title, y_title, height=height,
        xaxis={"tickmode": "array", "tickvals": list(range(width)), "range": [-0.5, width + 0.3], "side": "top",
               "showgrid": False, "zeroline": False},
        yaxis={"autorange": "reversed", "type": "category", "showgrid": False, "rangemode": "normal",
               "tickfont": {"size": 10 if len(rows) > 40 else 12}},
        margin={"l": 140, "r": colour_bar_room([*HEATMAP_STATES, *(["this job"] if highlight_job is not None else []),
                                                 "holder", *teams_shown, *teams]), "t": top, "b": bottom},
        showlegend=False,
        # qm.js labels every 2nd, 4th, ... slot where the plot is too narrow for every label
        meta={"slot_ticks": width},
    )
    layout["title"] = {**layout["title"], "y": 1.0, "yref": "container", "yanchor": "top", "pad": {"t": 10}}
    free = sum(r.free for r in rows if _takes_work(r))
    return Chart(key, title, caption, _figure(data, layout), height=height,
                 notes={"free_gpus": free, "gpus": sum(len(r.slots) for r in rows)})


# ---------------------------------------------------------------------------------- a job


def _segment_label(segment: Mapping[str, Any]) -> str:
    """A timeline row's words: the state's label, or why a stopping job stops (its `label`)."""
    label = str(segment.get("label") or segment["state"])
    return str(JobState(label).label) if label in JobState.values else label[:1].upper() + label[1:]


def job_timeline(segments: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]], *, now: datetime) -> Chart:
    """Gantt-style: one bar per stretch of time the job spent in a state, events as marks."""
    title = "Timeline"
    caption = "What the job did and when: a bar per stretch in each state, a mark per recorded event (hover for its words)."
    x_title, y_title = "time (UTC)", "state"
    if not segments and not events:
        return _empty("timeline", title, caption, x_title, y_title,
                      "No event has been recorded for this job yet. Submission, binding, preemption and exit appear here.", category="y")
    # A row per state, and per reason while stopping (a segment's `label`: "Stopping: cancelled",
    # "Stopping: runtime limit", "Preempting"), in the states' order.
    rows: list[tuple[str, str]] = []
    for state in [s.value for s in JobState]:
        for seg in segments:
            row = (_segment_label(seg), state)
            if seg["state"] == state and row not in rows:
                rows.append(row)
    data: list[dict[str, Any]] = []
    for label, state in rows:
        mine = [seg for seg in segments if seg["state"] == state and _segment_label(seg) == label]
        data.append({
            "type": "bar", "orientation": "h", "name": label,
            "y": [label] * len(mine),
            "base": [ts(seg["start"]) for seg in mine],
            "x": [max(1000.0, ((seg["end"] or now) - seg["start"]).total_seconds() * 1000.0) for seg in mine],
            "marker": {"color": STATE_COLOURS.get(state, "#868e96")},
            "hovertext": [
                f"{label} from {ts(seg['start'])} to {ts(seg['end']) if seg['end'] else 'now'}"
                f" ({duration(((seg['end'] or now) - seg['start']).total_seconds())})"
                for seg in mine
            ],
            "hoverinfo": "text",
        })
    if events:
        data.append({
            "type": "scatter", "mode": "markers", "name": "events", "y": ["events"] * len(events),
            "x": [ts(e["created_at"]) for e in events],
            "marker": {"symbol": "diamond", "size": 10, "color": "#343a40"},
            "hovertext": [f"{ts(e['created_at'])} · {e['kind']}<br>{e['reason']}: {said(e['message'])[:160]}" for e in events],
            "hoverinfo": "text",
        })
    categories = ["events"] + [label for label, _ in rows]
    layout = _layout(title, x_title, y_title, height=max(220, 60 + 44 * len(categories)),
                     barmode="overlay", xaxis={"type": "date"},
                     yaxis={"type": "category", "categoryorder": "array", "categoryarray": categories[::-1],
                            "rangemode": "normal"})
    return Chart("timeline", title, caption, _figure(data, layout), height=layout["height"])


# --------------------------------------------------------------------------------- teams


def quota_usage(gpu_type: str, rows: Sequence[Mapping[str, Any]]) -> Chart:
    """Per team on one GPU type: nominal quota, GPUs used now, of which borrowed, and lent."""
    key = "quota_" + "".join(c if c.isalnum() else "_" for c in gpu_type.lower())
    title = f"Quota and use of {gpu_type} GPUs"
    caption = (
        "Per team: guaranteed quota, GPUs held now, the part of them borrowed beyond the quota, and the "
        "team's idle quota that other teams of its cohort are using (lent)."
    )
    x_title, y_title = "team", "GPUs"
    if not rows:
        return _empty(key, title, caption, x_title, y_title,
                      f"No team has a quota on {gpu_type} or holds any of its GPUs yet. Once an admin sets quotas, each "
                      "team's quota, use, borrowing and lending appear here.", category="x")
    teams = [r["team"] for r in rows]
    series = (("quota", "nominal", "#adb5bd"), ("used", "used", "#1c7ed6"), ("borrowed", "borrowed", "#e8590c"),
              ("lent", "lent", "#2b8a3e"))
    data = [{"type": "bar", "name": label, "x": teams, "y": [r[field_] for r in rows], "marker": {"color": colour}}
            for label, field_, colour in series]
    layout = _layout(title, x_title, y_title, hovermode=BARS_HOVER, barmode="group", xaxis={"type": "category"})
    return Chart(key, title, caption, _figure(data, layout))


def dominant_share(samples: Sequence[Mapping[str, Any]], team_ids: Mapping[str, int]) -> Chart:
    """A line per team (every team in `team_ids`, name → id, and any a sample names)."""
    shown = sorted(set(team_ids) | {t for s in samples for t in (s["dominant_share_by_team"] or {})})
    colours = team_colours(team_ids)

    def traces(x: list[str]) -> list[dict[str, Any]]:
        return [
            {"type": "scatter", "mode": "lines", "name": team, "x": x, "line": {"color": colours.get(team, NO_TEAM_COLOUR), "shape": "hv"},
             "y": [round(100.0 * float((s["dominant_share_by_team"] or {}).get(team, 0.0)), 2) for s in samples]}
            for team in shown
        ]

    return _time_series("dominant_share", "Dominant share per team",
                        "Each team's dominant share at each cycle, as qm sshare's SHARE: the largest of its GPU, CPU "
                        "and memory shares, each what it held then plus its past usage decayed by the fair-share "
                        "half-life, over the fleet's capacity. Among jobs of equal priority the lower share goes "
                        "first.", "dominant share (% of the fleet)", samples,
                        NO_CYCLE_YET + "Each team's dominant share appears here.", traces, yaxis={"ticksuffix": "%"})


def distribution_box(key: str, title: str, caption: str, y_title: str,
                     stats: Sequence[Mapping[str, Any]], empty: str, *, team_ids: Mapping[str, int],
                     log_y: bool = False, floor: float | None = None) -> Chart:
    """Box plots from precomputed quartiles (the browser never receives the raw values), one per
    team, in the team's colour (`team_ids`: name → id). `floor`: the least value the measure can
    take (a bounded slowdown's 1), where a log axis starts."""
    x_title = "team"
    usable = [s for s in stats if s["n"] > 0]
    if not usable:
        return _empty(key, title, caption, x_title, y_title, empty, category="x")
    known = team_colours(team_ids)
    colours = {s["team"]: known.get(s["team"], NO_TEAM_COLOUR) for s in usable}
    data: list[dict[str, Any]] = [{
        "type": "box", "name": s["team"], "x": [s["team"]],
        "q1": [s["q1"]], "median": [s["median"]], "q3": [s["q3"]],
        "lowerfence": [s["low"]], "upperfence": [s["high"]], "mean": [s["mean"]],
        "marker": {"color": colours[s["team"]]}, "boxmean": True,
        "hovertemplate": (f"{s['team']}: n={s['n']}<br>median %{{median}}<br>q1 %{{q1}} · q3 %{{q3}}"
                          f"<br>mean {s['mean']:g}" + (f" · longest {s['max']:g}" if s.get("max") is not None else "")
                          + "<extra></extra>"),
    } for s in usable]
    # Outliers are not drawn (the browser gets quartiles, not values): the longest value beyond
    # the whisker is, so a mean pulled above the whisker by it has a visible reason.
    data += [{
        "type": "scatter", "mode": "markers", "name": f"{s['team']} longest", "x": [s["team"]], "y": [s["max"]],
        "marker": {"color": colours[s["team"]], "symbol": "circle-open", "size": 9}, "showlegend": False,
        "hovertemplate": f"{s['team']}: longest {s['max']:g}<extra></extra>",
    } for s in usable if s.get("max") is not None and s["max"] > s["high"]]
    layout = _layout(title, x_title, y_title, showlegend=False, xaxis={"type": "category"},
                     yaxis={"type": "log" if log_y else "linear"})
    if log_y:
        layout["yaxis"].pop("rangemode", None)
        # Only the decades are labelled (1, 10, 100): Plotly labelled every tick between them by
        # its first digit, and on an axis from 1 to just over 10 the 9, 8, 7, 6 crowded under the 10.
        layout["yaxis"]["dtick"] = 1
        if floor is not None:
            # Plotly's own range put every slowdown of 1 mid-axis, from 0.1 to 10, and labelled
            # 0.5 and 0.2 as "5" and "2" below the "1": read as slowdowns of 5 and 2 under 1. The
            # axis starts a little under the floor, at least one decade high, above the longest.
            top = max(max(s["high"], s["mean"], s.get("max") or 0.0) for s in usable)
            layout["yaxis"]["range"] = [math.log10(floor) - 0.04, math.log10(max(top, floor * 10)) + 0.08]
    return Chart(key, title, caption, _figure(data, layout))


#: A job state whose badge colour a colour-blind reader sees alike another's (CIE76 ΔE under 20 as
#: deuteranopes or protanopes see them: running beside failed and timed out, pending beside
#: preempting, timed out beside unschedulable at 4.3) is hatched in its own pattern on the state
#: bars, drawn in white over its colour; the common states stay plain.
STATE_PATTERNS = {JobState.PREEMPTING.value: "\\", JobState.FAILED.value: "x", JobState.TIMED_OUT.value: "/",
                  JobState.UNSCHEDULABLE.value: "."}


def _state_bars(key: str, title: str, caption: str, x_title: str, y_title: str, counts: Mapping[tuple[str, str], int],
                series: Iterable[tuple[str, str, str]], empty: str, *, patterns: Mapping[str, str] | None = None) -> Chart:
    """Bars per group (x), stacked by state in `series`' order ((value, label, colour) each).
    `counts` maps (group, state value) to a count; states with no count anywhere are left out.
    `patterns`: a state's hatching (plotly's pattern shapes), over its colour."""
    if not counts:
        return _empty(key, title, caption, x_title, y_title, empty, category="x")
    groups = sorted({group for group, _ in counts})
    data = []
    for value, label, colour in series:
        ys = [counts.get((g, value), 0) for g in groups]
        if any(ys):
            marker: dict[str, Any] = {"color": colour}
            if patterns and value in patterns:
                marker["pattern"] = {"shape": patterns[value], "fillmode": "overlay", "fgcolor": "#ffffff",
                                     "fgopacity": 0.8, "size": 7, "solidity": 0.3}
            data.append({"type": "bar", "name": label, "x": groups, "y": ys, "marker": marker})
    layout = _layout(title, x_title, y_title, hovermode=BARS_HOVER, barmode="stack", xaxis={"type": "category"})
    _whole_ticks(layout, data)
    return Chart(key, title, caption, _figure(data, layout))


def _in_badge_colours(states: Iterable[JobState] | Iterable[NodeState]) -> list[tuple[str, str, str]]:
    return [(state.value, state.label, STATE_COLOURS.get(state, "#868e96")) for state in states]


def jobs_by_state(rows: Sequence[Mapping[str, Any]]) -> Chart:
    return _state_bars(
        "jobs_by_state", "Jobs by state",
        "Per team: jobs waiting or running now, and jobs submitted in the window that have finished, by state.",
        "team", "jobs", {(r["team"], r["state"]): r["n"] for r in rows}, _in_badge_colours(JobState),
        "No job has been submitted in this window. Each team's jobs per state appear here.", patterns=STATE_PATTERNS)


# ------------------------------------------------------------------------------- showback


#: The share of an hour's or a day's width left between the cost bars (plotly's default bargap).
BUCKET_BAR_GAP = 0.2


#: At most this many ticks under the cost bars: a tick every bucket while they fit, else every
#: few buckets (`period_ticks`).
MAX_PERIOD_TICKS = 8


def period_strides(bucket_s: int) -> tuple[int, ...]:
    """The numbers of periods one tick may stand from the next, fewest first: hours in steps
    that divide a day, days in steps of a week or two."""
    return (1, 2, 3, 4, 6, 12, 24) if bucket_s < 86400 else (1, 2, 3, 7, 14)


def period_ticks_zoomed(bucket_s: int) -> dict[str, Any]:
    """What the page needs to tick a zoomed chart as `period_ticks` ticks the whole window
    (qm.js: periodTicks, at each zoom, pan or reset): the period and the strides in ms, and the
    most ticks. Spaced once for the whole window, the ticks of 26 hour bars stood every 4 hours
    whatever the range drawn: two in a zoom to 8 hours, 60 in a zoom out to ten days."""
    return {"period": bucket_s * 1000, "strides": [k * bucket_s * 1000 for k in period_strides(bucket_s)],
            "most": MAX_PERIOD_TICKS, "day_labels": bucket_s >= 86400}


def period_ticks(first: datetime, last: datetime, bucket_s: int) -> dict[str, Any]:
    """The x-axis of bars that each cover a period (an hour or a day, from `first` to `last`,
    the first and last bars' starts): its ticks on the periods' starts, a whole number of
    periods apart, where plotly's own spacing put them every 12 hours over day bars and on the
    half hours over hour bars, in the middle of a bar. Hours are ticked from midnight (00:00,
    06:00, …), days from the first bar. With a tick on every day bar each label ("Dec 2") is
    centred on the day it names (`ticklabelmode: "period"`); an hour's label ("17:00") names an
    instant, the start of its bar, and stands on it, as a label does with a tick every few bars
    (a period's label centred on seven bars would read as the middle one's). One bar alone
    (a 30m window inside an hour) is ticked at its period's start and end: its axis holds its
    whole period (`cost_over_time`)."""
    count = int((last - first).total_seconds() // bucket_s) + 1
    steps = period_strides(bucket_s)
    every = next((k for k in steps if math.ceil(count / k) <= MAX_PERIOD_TICKS), None)
    if every is None:
        every = steps[-1] * math.ceil(count / (MAX_PERIOD_TICKS * steps[-1]))
    origin = first
    if bucket_s < 86400:
        origin = first.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    axis: dict[str, Any] = {"tickmode": "linear", "tick0": ts(origin), "dtick": every * bucket_s * 1000}
    if every == 1 and bucket_s >= 86400:
        axis["ticklabelmode"] = "period"
    return axis


#: What an empty showback chart says of its period: GPU time was measured and none was charged.
#: A period the accounting never recorded says so instead (`nothing`: showback_data.unrecorded_sentence).
NOTHING_CHARGED = "No GPU time has been charged in this window."


def partial_buckets_said(start: datetime, end: datetime, bucket: str, bucket_s: int, bars: Iterable[datetime]) -> str:
    """The caption's words for the bars whose bucket the window cuts: a bar sits on its whole
    bucket but counts only the window's part of it. "Cost per hour" over 19:10 to 19:30 drew one
    bar across 19:00 to 20:00 with nothing to say it held twenty minutes (demo walk, 6 Dec). Only
    the bars drawn (`bars`, their buckets' starts): a cut bucket with no cost has none to explain.
    Empty when no bar's bucket is cut."""
    drawn = {at.timestamp() for at in bars}
    cut = []
    for moment in (start, end):
        into = moment.timestamp() % bucket_s
        if into:
            at = moment.timestamp() - into
            if at in drawn and at not in cut:
                cut.append(at)
    if not cut:
        return ""
    fmt = "%Y-%m-%d" if bucket_s >= 86400 else "%Y-%m-%d %H:%M"
    named = " and that of ".join(datetime.fromtimestamp(at, timezone.get_fixed_timezone(0)).strftime(fmt) for at in cut)
    return (f" The window, {ts(start)} to {ts(end)} UTC, cuts the {bucket} of {named}: "
            f"{'its bar counts' if len(cut) == 1 else 'their bars count'} only the part inside it.")


def cost_over_time(series: Mapping[str, Sequence[tuple[datetime, float]]], group_label: str, bucket: str,
                   bucket_s: int, *, team_ids: Mapping[str, int] | None = None, nothing: str = "",
                   window: tuple[datetime, datetime] | None = None) -> Chart:
    """Cost per bucket, stacked by group; grouped by team (`team_ids`, name → id), in the teams'
    own colours, as on every other page. `nothing`: what an empty chart says of its period in
    place of `NOTHING_CHARGED`. `window`: the report's start and end, whose buckets the caption
    says are partial when it cuts them (`partial_buckets_said`)."""
    key, title = "cost_over_time", f"Cost per {bucket} by {group_label}"
    caption = f"GPU cost per {bucket} by {group_label}, at the price of each GPU type and capacity tier in force then."
    x_title, y_title = f"{bucket} (UTC)", "cost (USD)"
    if not series or not any(v for _, points in series.items() for _, v in points):
        return _empty(key, title, caption, x_title, y_title,
                      f"{nothing or NOTHING_CHARGED} Cost per {group_label} per {bucket} appears here.")
    colours = group_colours(series.keys())
    if team_ids is not None:
        colours = {name: team_colour(team_ids[name]) if name in team_ids else colours[name] for name in series}
    # Each bar drawn inside its own bucket (x is the bucket's start; "middle" centres the bar on the
    # bucket, where "start" centred it on the bucket's start, half of it in the bucket before) and
    # as wide as most of it: plotly sizes bars by the distance between neighbours, so a window of
    # one bucket drew a 1 ms bar on an axis of fractions of a second.
    width = bucket_s * 1000 * (1 - BUCKET_BAR_GAP)
    # The bars are cents already, each group's adding up to its row in the table
    # (`showback.cost_over_time`): drawn as they are, never rounded again here.
    data = [
        {"type": "bar", "name": name, "x": [ts(at) for at, _ in points], "y": [float(v) for _, v in points],
         "marker": {"color": colours[name]}, "xperiod": bucket_s * 1000, "xperiodalignment": "middle",
         "width": [width] * len(points)}
        for name, points in sorted(series.items())
    ]
    starts = [at for points in series.values() for at, _ in points]
    first, last = min(starts), max(starts)
    # One bar: plotly's range around a bar drawn inside its period held no period's start, so
    # the axis had no tick and no label (a 30m window: a bar of $ saying no hour, until 7 Dec).
    # The range (and the one a reset returns to) takes in the whole period: its start is ticked
    # and labelled ("04:00", or a day's label centred on it), and the next period's start.
    whole = {"autorangeoptions": {"include": [ts(first), ts(first + timedelta(seconds=bucket_s))]}} \
        if first == last else {}
    layout = _layout(title, x_title, y_title, hovermode=BARS_HOVER, barmode="stack",
                     xaxis={"type": "date", **period_ticks(first, last, bucket_s), **whole},
                     yaxis={"tickprefix": "$"}, meta={"period_ticks": period_ticks_zoomed(bucket_s)})
    if window is not None:
        caption += partial_buckets_said(*window, bucket, bucket_s, {at for points in series.values() for at, _ in points})
    return Chart(key, title, caption, _figure(data, layout))


def cost_breakdown(rows: Sequence[Mapping[str, Any]], label: str, *, nothing: str = "") -> Chart:
    """Each group's cost split by what the GPU time did: productive, active but not productive,
    allocated but idle on the device; the fleet's capacity that no job held, for fleet readers."""
    key, title = "cost_split", "Where the money went"
    caption = (f"Cost per {label}, split in proportion to its productive, active-only and allocated-only "
               "GPU-hours; “no job” is capacity the fleet paid for that no job held.")
    x_title, y_title = "cost (USD)", label
    shown = [r for r in rows if not r["is_total"] and (r["cost_usd"] or r["is_idle"])]
    if not any(float(r["cost_usd"]) for r in shown):
        return _empty(key, title, caption, x_title, y_title,
                      f"{nothing or NOTHING_CHARGED} Each {label}'s cost, split by tier, appears here.", category="y")
    labels = ["no job (idle capacity)" if r["is_idle"] else r["name"] for r in shown]
    # A row's parts are its cents shared out (`showback.cost_by_tier`): they add up to its cost.
    parts = (
        ("productive", lambda r: 0.0 if r["is_idle"] else r["cost_productive_usd"], TIER_COLOURS["productive"]),
        ("active, not productive", lambda r: 0.0 if r["is_idle"] else r["cost_active_only_usd"], TIER_COLOURS["active"]),
        ("allocated, idle on the device", lambda r: 0.0 if r["is_idle"] else r["cost_allocated_only_usd"],
         TIER_COLOURS["allocated"]),
        ("capacity no job held", lambda r: float(r["cost_usd"]) if r["is_idle"] else 0.0, "#adb5bd"),
    )
    data = [
        {"type": "bar", "orientation": "h", "name": name, "y": labels, "x": [float(pick(r)) for r in shown],
         "marker": {"color": colour}}
        for name, pick, colour in parts if any(pick(r) for r in shown)
    ]
    height = max(260, 90 + 30 * len(shown))
    layout = _layout(title, x_title, y_title, barmode="stack", hovermode="y unified", height=height,
                     xaxis={"tickprefix": "$"},
                     yaxis={"type": "category", "autorange": "reversed", "rangemode": "normal"})
    return Chart(key, title, caption, _figure(data, layout), height=height)


def waste(rows: Sequence[Mapping[str, Any]], label: str, with_idle_reserved: bool, *, nothing: str = "") -> Chart:
    # Idle reserved quota is per team: other groupings chart (and name) preemption waste only.
    key, title = "waste", "Preemption waste and idle reserved quota" if with_idle_reserved else "Preemption waste"
    caption = ("Per " + label + ": work thrown away by preemptions and requeues since the last checkpoint, in $"
               + ("; and guaranteed quota neither used nor lent to the cohort, at the reserved price." if with_idle_reserved
                  else "."))
    x_title, y_title = label, "USD"
    shown = [r for r in rows if not r["is_total"] and not r["is_idle"]]
    series = [("preemption waste", "preemption_waste_usd", "#e8590c")]
    if with_idle_reserved:
        series.append(("idle reserved quota", "idle_reserved_usd", "#868e96"))
    if not any(r.get(f) for r in shown for _, f, _ in series):
        # Work lost whose cost rounds to no cent (or ran on unpriced capacity) is not nothing:
        # the table beside says its GPU-hours ("$0.00 (< 0.01 GPU-h)").
        lost = sum(float(r.get("lost_gpu_hours") or 0) for r in shown)
        sentence = (f"Work lost to preemptions and requeues in this window, {gpu_hours(lost)} GPU-hours, came to $0.00 "
                    f"to the cent; the table gives it per {label}. " if lost > 0
                    else f"{nothing} " if nothing else "Nothing was wasted in this window. ")
        return _empty(key, title, caption, x_title, y_title,
                      sentence + ("Preemption waste and idle reserved quota per "
                                                               f"{label} appear here." if with_idle_reserved else
                                                               f"Preemption waste per {label} appears here."),
                      category="x")
    data = [{"type": "bar", "name": name, "x": [r["name"] for r in shown],
             "y": [round(float(r.get(f) or 0), 2) for r in shown], "marker": {"color": colour}}
            for name, f, colour in series]
    layout = _layout(title, x_title, y_title, hovermode=BARS_HOVER, barmode="group", xaxis={"type": "category"},
                     yaxis={"tickprefix": "$"})
    return Chart(key, title, caption, _figure(data, layout))


def unit_costs(rows: Sequence[Mapping[str, Any]], label: str, *, nothing: str = "") -> Chart:
    key, title = "unit_costs", "Price of a GPU-hour"
    caption = (f"Per {label}: cost ÷ allocated GPU-hours, and cost ÷ productive GPU-hours — the gap is what "
               "stalls, lost work and idle devices add to each useful hour.")
    x_title, y_title = label, "USD per GPU-hour"
    shown = [r for r in rows if not r["is_idle"] and r["usd_per_gpu_hour"] is not None]
    if not shown:
        return _empty(key, title, caption, x_title, y_title,
                      f"{nothing or NOTHING_CHARGED} Each {label}'s price per GPU-hour appears here.", category="x")
    # TOTAL for finance and admins divides the whole fleet's cost, idle capacity included, by what
    # the jobs used: the fully loaded price, not an average of the bars beside it.
    fleet = any(r["is_idle"] for r in rows)
    total = "TOTAL, idle capacity included" if fleet else "TOTAL"
    if any(r["name"] == total for r in shown if not r["is_total"]):
        # A team stored as TOTAL (before the name was refused): one category would hold both bars.
        total = "the report's TOTAL"
    if fleet:
        caption += (" TOTAL is fully loaded: the whole fleet's cost, idle capacity included, over the GPU-hours "
                    "jobs used.")
    names = [total if r["is_total"] else r["name"] for r in shown]
    # The table's prices, rounded once (`showback.shown_price`): the exact price rounded here
    # again, as a float, read $2.15 beside the table's $2.14 for $2.145 (until 7 Dec).
    data = [
        {"type": "bar", "name": name, "x": names,
         "y": [None if r["prices_shown"][price] is None else float(r["prices_shown"][price]) for r in shown],
         "marker": {"color": TIER_COLOURS[tier]}}
        for name, price, tier in (("per allocated GPU-hour", "usd_per_gpu_hour", "allocated"),
                                  ("per productive GPU-hour", "usd_per_productive_gpu_hour", "productive"))
    ]
    layout = _layout(title, x_title, y_title, hovermode=BARS_HOVER, barmode="group", xaxis={"type": "category"},
                     yaxis={"tickprefix": "$"})
    return Chart(key, title, caption, _figure(data, layout))


# ---------------------------------------------------------------------------------- nodes


#: The chart's pseudo-state for a node inside a maintenance window now, whatever its own state: it
#: takes no work, as the overview's "away" and the fragmentation API's `unavailable_gpus` count it.
IN_MAINTENANCE = "maintenance"
MAINTENANCE_COLOUR = "#e8590c"  # the Nodes page's badge of an active window

#: A node state whose colour a colour-blind reader sees alike another's (CIE76 ΔE under 20 as
#: deuteranopes or protanopes see them: ready beside in maintenance, 17.4, and down, 17.0; in
#: maintenance beside suspect, 12.6; draining beside quarantined, 14.8) is hatched on the node-state
#: bars as STATE_PATTERNS hatches the job states; ready, the common state, stays plain.
NODE_STATE_PATTERNS = {IN_MAINTENANCE: "/", NodeState.DOWN.value: "x", NodeState.QUARANTINED.value: "\\"}


def nodes_by_state(rows: Sequence[Mapping[str, Any]]) -> Chart:
    """`rows`: pool, state (a NodeState value, or IN_MAINTENANCE) and GPUs."""
    ready, *others = _in_badge_colours(NodeState)
    return _state_bars(
        "node_states", "GPUs by pool and node state",
        "How many GPUs each pool has on nodes that are ready, in a maintenance window now, cordoned, "
        "draining, suspect, down or quarantined.",
        "pool", "GPUs", {(r["pool"], r["state"]): r["gpus"] for r in rows},
        [ready, (IN_MAINTENANCE, "In maintenance", MAINTENANCE_COLOUR), *others],
        "No node has registered yet. Each pool's GPUs by node state appear here.", patterns=NODE_STATE_PATTERNS)


# -------------------------------------------------------------------------------- what-if


def what_if_bars(key: str, title: str, caption: str, y_title: str, metrics: Sequence[tuple[str, str]],
                 runs: Sequence[tuple[str, Mapping[str, Any]]], *, scale: float = 1.0, suffix: str = "",
                 x_title: str = "measure") -> Chart:
    """The same metrics for two replays side by side: one bar group per metric (or per team,
    with `x_title="team"`), one colour per run."""
    if not runs:
        return _empty(key, title, caption, x_title, y_title, "Run a replay to compare the two policies here.", category="x")
    colours = ("#1c7ed6", "#e8590c")
    data = []
    for i, (name, result) in enumerate(runs):
        ys = [_number(result.get(m), scale) for m, _ in metrics]
        # The legend (which does not wrap) names the run; the hover, like the table, the whole policy.
        # The bar's label reads as the table's cell: a share with its "%", a wait without the
        # unit its axis title names ("0.36 min0.39 min" ran together over two runs' narrow
        # bars); the hover says the unit.
        shown = "%" if suffix == "%" else ""
        data.append({"type": "bar", "name": name.split(" (", 1)[0], "x": [label for _, label in metrics], "y": ys,
                     "marker": {"color": colours[i % 2]},
                     # a share as the table's cell says it (percent_text: "50%", not "50.0%")
                     "text": [None if y is None else percent_text.percent(y / 100) if shown else f"{y}" for y in ys],
                     "customdata": [None if y is None else f"{y}{suffix}" for y in ys],
                     "textposition": "outside",
                     "hovertemplate": f"{name}<br>%{{x}}: %{{customdata}}<extra></extra>"})
    layout = _layout(title, x_title, y_title, barmode="group", xaxis={"type": "category"})
    return Chart(key, title, caption, _figure(data, layout))


def _number(value: Any, scale: float) -> float | int | None:
    """A measure for a bar: counts stay whole numbers, the rest keep two decimals."""
    if value is None:
        return None
    if isinstance(value, int) and scale == 1.0:
        return value
    return round(float(value) * scale, 2)


def charts_json(charts: Iterable[Chart]) -> dict[str, dict[str, Any]]:
    return {c.key: c.as_json() for c in charts}
