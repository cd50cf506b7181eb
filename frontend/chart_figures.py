"""A chart's figures in words: the text alternative beside every Plotly chart, read from the very
figure dict the browser draws (`frontend/figures.py`), so a screen reader (or anyone who opens it)
gets the chart's own numbers, never a description that could drift from them.

One table per chart, its first column naming each row (a `th` with `scope="row"`):
- a heat map (the fleet's GPU slots): a row per node, how many of its slots each holder has, and
  the jobs there as links to their pages (a cell's click opens the same);
- box plots (quartiles): a row per box, its median, quartiles, whiskers, mean (and longest value);
- a timeline (horizontal bars from a `base`, marks with hover text): a row per stretch or event,
  as its hover says it;
- bars or lines over categories (teams, pools, measures): a row per category, a column per trace;
- a time series: a row per trace, its latest, lowest and highest value with their times (and for
  bars, their total), the full series being up to 288 points.

A time series has two more things beside it, made from the same figure: its time ranges (`time_range`:
the spans its buttons show, the keyboard's way to plotly's zoom and pan) and its values at each
point (`values_table`: a row per time, newest first, the keyboard's way to a hover's exact value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.urls import reverse

from frontend.templatetags.qm import usd

#: What a cell says when a trace has no value there.
NONE = "–"


def number(value: float | int, prefix: str = "", suffix: str = "") -> str:
    """A figure as the page beside the chart says it: thousands separated, at most two decimals,
    halves up, trailing zeros dropped ("1,297.5", "3"); dollars as the page's `usd` writes them,
    to the cent ("$1,297.80"). Until 6 Dec the table read "$1297.8" beside the page's "$1,297.80"."""
    if prefix == "$":
        return usd(value) + suffix
    amount = Decimal(str(float(value))).quantize(Decimal("0.01"), ROUND_HALF_UP)
    text = f"{abs(amount) if amount == 0 else amount:,f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return f"{prefix}{text}{suffix}"


def _axis(layout: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    axis = layout.get(name)
    return axis if isinstance(axis, Mapping) else {}


def _axis_title(layout: Mapping[str, Any], name: str, default: str) -> str:
    title = _axis(layout, name).get("title")
    text = title.get("text") if isinstance(title, Mapping) else title
    return str(text or default)


def _unit(layout: Mapping[str, Any], name: str) -> tuple[str, str]:
    axis = _axis(layout, name)
    return str(axis.get("tickprefix") or ""), str(axis.get("ticksuffix") or "")


def _words(text: Any) -> str:
    """Hover text as a sentence: its line breaks as " · ", its tags gone."""
    return re.sub(r"<[^>]+>", "", re.sub(r"<br\s*/?>", " · ", str(text))).strip()


def _numbers(values: Sequence[Any] | None) -> list[float]:
    return [float(v) for v in values or () if isinstance(v, (int, float)) and not isinstance(v, bool)]


def _shown(trace: Mapping[str, Any]) -> bool:
    """A trace that is a figure (not the heat map's labels written as text beside its rows)."""
    return not (trace.get("mode") == "text" and trace.get("showlegend") is False)


def link(text: str, href: str) -> dict[str, str]:
    """A part of a cell that is a link: {"text", "href"}. A cell is a string, or a list of strings
    and links (the `figure_cell` filter and qm.js's writeFigures write both)."""
    return {"text": text, "href": href}


def _job_links(jobs: Mapping[int, int]) -> str | list[str | dict[str, str]]:
    """The jobs a heat map's row holds, each a link to its page (where a click on its cell leads),
    with its GPUs there: "job 12 (4 GPUs), job 15 (1 GPU)"."""
    parts: list[str | dict[str, str]] = []
    for job_id, gpus in jobs.items():
        if parts:
            parts.append(", ")
        parts += [link(f"job {job_id}", reverse("frontend:job", args=[job_id])), f" ({gpus} GPU{'s' * (gpus != 1)})"]
    return parts or NONE


def _heatmap(trace: Mapping[str, Any], layout: Mapping[str, Any]) -> dict[str, Any]:
    """A row per node: its slots by holder, and the jobs it holds that a click on a cell opens (the
    trace's `customdata`: a job's id where the viewer may read it), as links: the keyboard's way
    to what the pointer reaches in the chart."""
    categories = list(trace.get("colorbar", {}).get("ticktext") or [])
    opens = list(trace.get("customdata") or [])
    rows = []
    for i, (label, cells) in enumerate(zip(trace.get("y") or [], trace.get("z") or [], strict=False)):
        counts: dict[str, int] = {}
        for cell in cells:
            if cell is not None and 0 <= int(cell) < len(categories):
                name = str(categories[int(cell)])
                counts[name] = counts.get(name, 0) + 1
        said = ", ".join(f"{name} {counts[name]}" for name in categories if name in counts)
        jobs: dict[int, int] = {}
        for job_id in opens[i] if i < len(opens) else ():
            if isinstance(job_id, int) and not isinstance(job_id, bool):
                jobs[job_id] = jobs.get(job_id, 0) + 1
        rows.append([str(label), said or NONE, _job_links(jobs)])
    return {"columns": [_axis_title(layout, "yaxis", "row"), "GPU slots by holder", "jobs on it"],
            "rows": rows}


def _boxes(traces: Sequence[Mapping[str, Any]], layout: Mapping[str, Any]) -> dict[str, Any]:
    prefix, suffix = _unit(layout, "yaxis")

    def n(values: Any) -> str:
        found = _numbers(values)
        return number(found[0], prefix, suffix) if found else NONE

    longest = {str(t.get("x", [""])[0]): t for t in traces if t.get("type") == "scatter"}
    rows = []
    for t in traces:
        if t.get("type") != "box":
            continue
        name = str(t.get("name", ""))
        beyond = longest.get(name)
        rows.append([name, n(t.get("median")), f"{n(t.get('q1'))} to {n(t.get('q3'))}",
                     f"{n(t.get('lowerfence'))} to {n(t.get('upperfence'))}", n(t.get("mean")),
                     n(beyond.get("y")) if beyond else NONE])
    columns = [_axis_title(layout, "xaxis", "group"), "median", "quartiles", "whiskers", "mean",
               "longest beyond the whisker"]
    return {"columns": columns, "rows": rows}


def _timeline(traces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    rows = []
    for t in traces:
        for text in t.get("hovertext") or ():
            rows.append([str(t.get("name", "")), _words(text)])
    return {"columns": ["row", "what and when"], "rows": rows}


def _categories(traces: Sequence[Mapping[str, Any]], layout: Mapping[str, Any], horizontal: bool) -> dict[str, Any]:
    """Bars over categories: a row per category, a column per trace."""
    cat, val = ("y", "x") if horizontal else ("x", "y")
    prefix, suffix = _unit(layout, f"{val}axis")
    order: list[str] = []
    for t in traces:
        for c in t.get(cat) or ():
            if str(c) not in order:
                order.append(str(c))
    columns = [_axis_title(layout, f"{cat}axis", "category")] + [str(t.get("name", "")) for t in traces]
    rows = []
    for c in order:
        row = [c]
        for t in traces:
            cells = {str(k): v for k, v in zip(t.get(cat) or (), t.get(val) or (), strict=False)}
            value = cells.get(c)
            row.append(number(value, prefix, suffix) if isinstance(value, (int, float)) else NONE)
        rows.append(row)
    return {"columns": columns, "rows": rows}


def _series(traces: Sequence[Mapping[str, Any]], layout: Mapping[str, Any]) -> dict[str, Any]:
    """A time series: each trace's latest, lowest and highest value, when; bars also their total."""
    prefix, suffix = _unit(layout, "yaxis")
    bars = any(t.get("type") == "bar" for t in traces)
    rows = []
    for t in traces:
        points = [(x, float(y)) for x, y in zip(t.get("x") or (), t.get("y") or (), strict=False)
                  if isinstance(y, (int, float)) and not isinstance(y, bool)]
        if not points:
            rows.append([str(t.get("name", "")), NONE, NONE, NONE] + ([NONE] if bars else []))
            continue
        last = points[-1]
        low = min(points, key=lambda p: p[1])
        high = max(points, key=lambda p: p[1])
        row = [str(t.get("name", "")), f"{number(last[1], prefix, suffix)} at {last[0]}",
               f"{number(low[1], prefix, suffix)} at {low[0]}", f"{number(high[1], prefix, suffix)} at {high[0]}"]
        if bars:
            row.append(number(sum(y for _, y in points), prefix, suffix) if t.get("type") == "bar" else NONE)
        rows.append(row)
    columns = ["series", "latest (UTC)", "lowest (UTC)", "highest (UTC)"] + (["total"] if bars else [])
    return {"columns": columns, "rows": rows}


def _kind(traces: Sequence[Mapping[str, Any]], layout: Mapping[str, Any]) -> str:
    """What the figure draws: "heatmap", "box", "timeline", "categories", "hcategories" or "series"."""
    kinds = {t.get("type", "scatter") for t in traces}
    if "heatmap" in kinds:
        return "heatmap"
    if "box" in kinds:
        return "box"
    if any(t.get("base") is not None for t in traces):
        return "timeline"
    horizontal = any(t.get("orientation") == "h" for t in traces)
    if _axis(layout, "yaxis" if horizontal else "xaxis").get("type") == "category":
        return "hcategories" if horizontal else "categories"
    return "series"


def figures_table(figure: Mapping[str, Any]) -> dict[str, Any]:
    """The figure's numbers as a table: {"columns": [...], "rows": [[...], ...]} (times in UTC)."""
    layout = figure.get("layout") or {}
    traces = [t for t in figure.get("data") or () if _shown(t)]
    if not traces:
        return {"columns": [], "rows": []}
    kind = _kind(traces, layout)
    if kind == "heatmap":
        return _heatmap(next(t for t in traces if t.get("type") == "heatmap"), layout)
    if kind == "box":
        return _boxes(traces, layout)
    if kind == "timeline":
        return _timeline(traces)
    if kind in ("categories", "hcategories"):
        return _categories(traces, layout, kind == "hcategories")
    return _series(traces, layout)


def _time_series(figure: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], Mapping[str, Any]] | None:
    """The traces and layout of a time series with a point to show, else None."""
    layout = figure.get("layout") or {}
    traces = [t for t in figure.get("data") or () if _shown(t)]
    if not traces or _kind(traces, layout) != "series" or not any(t.get("x") for t in traces):
        return None
    return traces, layout


#: The spans a time series offers as "the last ...", shortest first: each that holds at least
#: SPAN_POINTS of the chart's steps and is shorter than all it shows ("All" is always there).
SPANS = (("Last 5 min", 300), ("Last 15 min", 900), ("Last hour", 3600), ("Last 6 h", 6 * 3600),
         ("Last 24 h", 86400), ("Last 7 days", 7 * 86400))
SPAN_POINTS = 4
#: The most rows a chart's values table shows at once (qm.js cuts, newest first, and says so):
#: a keyboard reaches the others through a shorter span and Earlier.
VALUES_SHOWN = 100


def _at(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")


def time_range(figure: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a time series' range buttons need: {"start", "end", "spans": [[label, seconds], ...]},
    start and end the span "All" draws (its points, a bar's whole bucket, a grey no-cycle stretch up
    to now), each span one of SPANS that fits; None for any other chart."""
    found = _time_series(figure)
    if found is None:
        return None
    traces, layout = found
    times: list[datetime] = []
    ends: list[datetime] = []
    buckets: list[float] = []
    for t in traces:
        at = [a for a in (_at(x) for x in t.get("x") or ()) if a is not None]
        times += at
        period = t.get("xperiod")  # a bar's bucket, in ms: its last bar reaches to the bucket's end
        if at and isinstance(period, (int, float)) and not isinstance(period, bool):
            ends.append(max(at) + timedelta(milliseconds=period))
            buckets.append(period / 1000)
    if not times:
        return None
    for shape in layout.get("shapes") or ():
        ends += [a for a in (_at(shape.get("x0")), _at(shape.get("x1"))) if a is not None]
    start, end = min(times), max([*times, *ends])
    distinct = sorted(set(times))
    steps = sorted((b - a).total_seconds() for a, b in zip(distinct, distinct[1:], strict=False))
    # A bar is as long as its bucket, however few there are: one day's bar of a month offered "Last
    # 5 min" to "Last 6 h" (no step between bars to measure), each a sliver of the one bar.
    step = max([steps[len(steps) // 2] if steps else 0.0, *buckets])
    shown = (end - start).total_seconds()
    spans = [[label, seconds] for label, seconds in SPANS if SPAN_POINTS * step <= seconds < shown]
    return {"start": _when(start), "end": _when(end), "spans": spans}


def values_table(figure: Mapping[str, Any]) -> dict[str, Any] | None:
    """A time series' value at each point, what a hover says there: a row per time (newest first,
    the time naming the row), a column per series, as the figures say numbers; None for any other
    chart. A series with no value at a time says "–". `shown`: the most rows qm.js shows at once."""
    found = _time_series(figure)
    if found is None:
        return None
    traces, layout = found
    prefix, suffix = _unit(layout, "yaxis")
    by_time: dict[str, list[str]] = {}
    for i, t in enumerate(traces):
        for x, y in zip(t.get("x") or (), t.get("y") or (), strict=False):
            row = by_time.setdefault(str(x), [NONE] * len(traces))
            # a later point at the same time wins: a step closed where a gap begins (None) holds
            # its value up to that time, and from then on there is none
            row[i] = number(y, prefix, suffix) if isinstance(y, (int, float)) and not isinstance(y, bool) else NONE
    columns = [_axis_title(layout, "xaxis", "time (UTC)")] + [str(t.get("name", "")) for t in traces]
    return {"columns": columns, "rows": [[at, *by_time[at]] for at in sorted(by_time, reverse=True)],
            "shown": VALUES_SHOWN}
