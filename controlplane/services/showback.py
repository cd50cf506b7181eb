"""Showback: what the fleet cost and who used it over a window, read from the accounting's rollups.

  - the window a report covers, as OpenCost spells it (`parse_window`: 7d, today, start,end;
    `month_window`: a calendar month), and a relative one read up to the last whole minute
    rolled (`rolled_window`);
  - `showback`: cost and the three tiers per team, project, job or priority class, with (for
    finance and admins) the capacity no job held, idle guarantees per GPU type and GPU time
    no rate priced;
  - its presentation: cents and tokens apportioned so the rows add up to TOTAL
    (`presented_money`, `presented_tokens`), finance's table (`showback_table`), written as CSV (`showback_csv`) and as an Excel workbook
    (`showback_xlsx`), named by `download_filename`, and
    OpenCost's allocation JSON (`showback_json`).

It only reads: services/accounting.py writes the rollups (docs/accounting.md defines every
figure). The utilization series (services/utilization_series.py) and a job's cost
(services/job_costs.py) take their windows, the rollup's progress and GPU-hours from here.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from functools import cached_property
from typing import Any

from django.db import connection
from django.db.models import Min, Subquery, Sum

from controlplane.models import (
    AccountingCursor,
    FleetRollup,
    GroupRollup,
    Job,
    PriceRate,
    QuotaRollup,
    UsageRollup,
)
from controlplane.services.accounting import (
    CURSOR_NAME,
    DAY,
    HOUR,
    MINUTE,
    MONTH,
    floor_month,
    hour_horizon,
    in_bucket,
    iso,
    next_month,
    raw_horizon,
)
from controlplane.services.instants import InstantRefused, instant_from_text
from controlplane.services.run_text import HUNDREDTH, rounded_cumulatively, share_said
from controlplane.services.showback_names import IDLE, TOTAL, UNALLOCATED, project_key
from controlplane.services.spreadsheet_cells import (
    HOURS_4,
    SHARE_4,
    USD,
    USD_4,
    USD_6,
    USD_12,
    WHOLE,
    Cell,
    Figure,
    csv_text,
    figure,
)
from controlplane.services.usage_tiers import apportion, ceil_to, floor_to
from controlplane.services.whole_numbers import is_whole_number, whole_number

GROUP_BY = ("team", "project", "job", "priority_class")
#: The kinds of row a report has (`ShowbackEntry.kind`): the JSON's `kind` on each allocation and
#: on `totals`, the CSV's `row_kind`.
KINDS = ("group", "idle", "total")
_HOUR_S = Decimal(3600)
_ZERO, _ONE = Decimal(0), Decimal(1)
_WINDOW_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: The longest window answered (ten years): a window is read as lists of bucket starts.
_MAX_WINDOW_S = 3660 * 86400


class AccountingQueryError(ValueError):
    """A showback or utilization request that cannot be answered; `field` names the culprit."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Window:
    start: datetime
    end: datetime
    label: str
    #: A relative window's length ("24h": 24 hours back from now). Showback reads it as that
    #: long, ending where the accounting has rolled whole minutes (`showback`).
    length: timedelta | None = None


def parse_window(text: str, now: datetime) -> Window:
    """A window as OpenCost spells it: a duration back from now ("30m", "24h", "7d", "2w"),
    "today", "yesterday", or two RFC 3339 instants "start,end". The names and units are read in
    any case and labelled in lower case (`7D` is `7d`): until 7 Dec the unit was read in any case
    but the names were not, so `7D` was a window and `TODAY` a 400. The API, the showback page
    and `qm showback --window` all read windows here; the other pages' `frontend/windows.py`
    takes its names in any case too."""
    text = (text or "").strip()
    if not text:
        raise AccountingQueryError("window", "Give a window such as 7d, 24h, today or start,end (RFC 3339).")
    if text.lower() in ("today", "yesterday"):
        day, name = floor_to(now, DAY), text.lower()
        return Window(day, now, name) if name == "today" else Window(day - timedelta(days=1), day, name)
    if "," in text:
        parts = text.split(",")
        if len(parts) != 2:
            raise AccountingQueryError("window", f"'{text}' is not a window: give two RFC 3339 instants, start,end.")
        first, second = parts
        start, end = _instant(first), _instant(second)
        if end <= start:
            # `start,start` is an empty window, not one that "ends before it starts".
            raise AccountingQueryError("window", f"The window ends ({second}) when it starts ({first}): it covers no "
                                       "time." if end == start else f"The window ends ({second}) before it starts "
                                       f"({first}).")
        if start >= now:
            raise AccountingQueryError("window", f"The window starts ({first}) after now ({iso(now)}): nothing "
                                       "has been used there yet.")
        end = min(end, now)
        if (end - start).total_seconds() > _MAX_WINDOW_S:
            raise AccountingQueryError("window", f"'{text}' spans more than ten years; use a shorter window.")
        return Window(start, end, text)
    number, unit = text[:-1], text[-1:].lower()
    # isdigit() then int(): '²d' passed the one and broke the other (a 500), '٣d' read as 3d
    count = whole_number(number) if number.isdigit() and is_whole_number(number) else 0
    if unit not in _WINDOW_UNITS or count <= 0:
        raise AccountingQueryError(
            "window", f"'{text[:40]}' is not a window: use a positive whole number with m, h, d or w (7d), "
            "today, yesterday (in any case), or start,end in RFC 3339."
        )
    seconds = count * _WINDOW_UNITS[unit]
    if seconds > _MAX_WINDOW_S:
        raise AccountingQueryError("window", f"'{text[:40]}' reaches back more than ten years; use a shorter window.")
    return Window(now - timedelta(seconds=seconds), now, f"{count}{unit}", timedelta(seconds=seconds))


def _instant(text: str) -> datetime:
    # The API's one rule for instants (a '+' a query string read as a space is read back too).
    try:
        return instant_from_text(text)
    except InstantRefused as refused:
        raise AccountingQueryError("window", f"{refused}.") from None


#: A month as every reader of showback takes it: four digits, a hyphen, two digits (ASCII).
_MONTH = re.compile(r"([0-9]{4})-([0-9]{2})")


def month_window(text: str, now: datetime) -> Window:
    """A calendar month in UTC, "YYYY-MM"; a month still running ends now.

    Exactly YYYY-MM, the one rule for the page, the API and `qm`: before (5 Dec) this read any
    two integers ("2026-1", "+2026-01", "２０２６-１１"), so /showback/?month=2026-1 showed
    January while the CSV and JSON links it offered (`month=2026-1`) were refused by the API."""
    match = _MONTH.fullmatch(text.strip())
    try:
        if match is None:
            raise ValueError(text)
        start = datetime(int(match[1]), int(match[2]), 1, tzinfo=UTC)
    except ValueError:
        raise AccountingQueryError("month", f"'{text}' is not a month: use YYYY-MM, such as 2026-11.") from None
    if start > now:
        raise AccountingQueryError("month", f"{text} has not started yet.")
    return Window(start, min(next_month(start), now), text)


@dataclass
class ShowbackEntry:
    """One group's figures over the window. GPU-seconds and money are exact decimals."""

    key: str
    name: str
    properties: dict[str, Any]
    #: What the row is: `group` (a team, project, job or priority class), `idle` (the capacity no
    #: job held) or `total`. Told by this, never by the name: a team stored as `TOTAL` or
    #: `__idle__` before such names were refused is a group like any other (`KINDS`).
    kind: str = "group"
    allocated_gpu_seconds: Decimal = Decimal(0)
    active_gpu_seconds: Decimal = Decimal(0)
    productive_gpu_seconds: Decimal = Decimal(0)
    lost_gpu_seconds: Decimal = Decimal(0)
    cost_usd: Decimal = Decimal(0)
    lost_cost_usd: Decimal = Decimal(0)
    useful_tokens: float = 0.0
    idle_reserved_gpu_seconds: Decimal | None = None
    idle_reserved_usd: Decimal | None = None
    idle_gpu_seconds: Decimal = Decimal(0)
    #: What the jobs that reported useful tokens cost (the numerator of $ per useful token).
    token_cost_usd: Decimal = Decimal(0)
    #: By team only (a guarantee is a team's): GPU-seconds the team used beyond its guarantee,
    #: the accounting's split of each minute (`QuotaRollup.borrowed_gpu_seconds`); None otherwise.
    borrowed_gpu_seconds: Decimal | None = None

    def add(self, other: ShowbackEntry) -> None:
        self.allocated_gpu_seconds += other.allocated_gpu_seconds
        self.active_gpu_seconds += other.active_gpu_seconds
        self.productive_gpu_seconds += other.productive_gpu_seconds
        self.lost_gpu_seconds += other.lost_gpu_seconds
        self.cost_usd += other.cost_usd
        self.lost_cost_usd += other.lost_cost_usd
        self.useful_tokens += other.useful_tokens
        self.idle_gpu_seconds += other.idle_gpu_seconds
        self.token_cost_usd += other.token_cost_usd
        if other.borrowed_gpu_seconds is not None:
            self.borrowed_gpu_seconds = (self.borrowed_gpu_seconds or Decimal(0)) + other.borrowed_gpu_seconds
        if other.idle_reserved_usd is not None:
            self.idle_reserved_usd = (self.idle_reserved_usd or Decimal(0)) + other.idle_reserved_usd
            self.idle_reserved_gpu_seconds = (self.idle_reserved_gpu_seconds or Decimal(0)) + (
                other.idle_reserved_gpu_seconds or Decimal(0)
            )

    @property
    def usd_per_gpu_hour(self) -> Decimal | None:
        return self.cost_usd * _HOUR_S / self.allocated_gpu_seconds if self.allocated_gpu_seconds else None

    @property
    def usd_per_productive_gpu_hour(self) -> Decimal | None:
        return self.cost_usd * _HOUR_S / self.productive_gpu_seconds if self.productive_gpu_seconds else None

    @property
    def usd_per_useful_token(self) -> Decimal | None:
        """What the jobs that reported useful tokens cost, over those tokens (docs/accounting.md,
        "$ per useful token"): the cost of jobs that reported none is not in it, but beside it
        (`cost_without_tokens_usd`)."""
        return self.token_cost_usd / Decimal(repr(self.useful_tokens)) if self.useful_tokens >= 1 else None

    @property
    def cost_without_tokens_usd(self) -> Decimal:
        """The cost that reported no useful tokens: jobs that reported none (and, in TOTAL and
        `__idle__`, the capacity no job held)."""
        return self.cost_usd - self.token_cost_usd

    @property
    def share_without_tokens(self) -> Decimal | None:
        # Most rows are all or nothing (a job, a team of one kind of work): no division for them.
        if not self.cost_usd:
            return None
        if self.token_cost_usd == self.cost_usd:
            return _ZERO
        if not self.token_cost_usd:
            return _ONE
        return self.cost_without_tokens_usd / self.cost_usd


@dataclass
class Showback:
    """Cost and the three tiers per group over one window, OpenCost-allocation shaped.

    `idle` (fleet readers only) is the capacity no job held: capacity − allocated, in GPU-seconds
    and $; with it, Σ entries + idle = what the fleet cost (`capacity_cost_usd`)."""

    window: Window
    start: datetime
    end: datetime
    group_by: str
    entries: list[ShowbackEntry]
    idle: ShowbackEntry | None
    capacity_gpu_seconds: Decimal | None
    capacity_cost_usd: Decimal | None
    rolled_until: datetime | None
    idle_reserved_gpu_seconds_total: Decimal = Decimal(0)
    idle_reserved_usd_total: Decimal = Decimal(0)
    #: Fleet readers: idle guarantees and idle capacity per GPU type (`IdleByGpuType`).
    idle_by_gpu_type: list[Any] = field(default_factory=list)
    #: Fleet readers: GPU time in the window before its GPU type and tier had any price
    #: (`Unpriced`), which the figures count at $0.
    unpriced: list[Any] = field(default_factory=list)
    #: When the accounting began (`accounting_began`), if the window starts before it: the time
    #: before was never recorded, so the figures count nothing there (not $0.00 of use).
    accounting_began: datetime | None = None
    #: A member's report (by team, project or job): the teams they do not read, as rows of the
    #: team report, so their own team's cents are apportioned as finance's are. Never shown.
    other_teams: list[ShowbackEntry] = field(default_factory=list)

    def __post_init__(self) -> None:
        # The idle row is the idle row by where it is, whatever built it.
        if self.idle is not None:
            self.idle.kind = "idle"

    @property
    def unrecorded(self) -> bool:
        """Nothing of the period was recorded: it ended when or before the accounting began (a
        month before the product was installed; on a fresh fleet, "last 7 days" before its first
        whole minute). Its rows read $0.00 only because there is no record: no figure of it is
        a cost, so the page shows none (docs/accounting.md, *The API*)."""
        return self.accounting_began is not None and self.accounting_began >= self.end

    @cached_property
    def total(self) -> ShowbackEntry:
        """Σ entries (+ `__idle__`'s cost for fleet readers), computed once per report."""
        total = ShowbackEntry(key=TOTAL, name=TOTAL, properties={}, kind="total")
        for entry in self.entries:
            total.add(entry)
        if self.idle is not None:
            total.cost_usd += self.idle.cost_usd
            total.idle_gpu_seconds = self.idle.idle_gpu_seconds
        return total


Segment = tuple[int, datetime, datetime]


def _floor(t: datetime, bucket: int) -> datetime:
    return floor_month(t) if bucket == MONTH else floor_to(t, bucket)


def _ceil(t: datetime, bucket: int) -> datetime:
    if bucket != MONTH:
        return ceil_to(t, bucket)
    month = floor_month(t)
    return month if month == t else next_month(month)


def _segments(start: datetime, end: datetime, now: datetime, levels: Sequence[int]) -> tuple[datetime, datetime, list[Segment]]:
    """[start, end) as rollup rows, coarsest first: whole months (if `levels` has them) from
    month rows, whole days from day rows, whole hours from hour rows, the rest from minute
    rows. Each end is aligned to the finest rows still kept there."""
    horizon, hours_from = raw_horizon(now), hour_horizon(now)

    def align(t: datetime, up: bool) -> datetime:
        bucket = MINUTE if t >= horizon else HOUR if t >= hours_from else DAY
        return ceil_to(t, bucket) if up else floor_to(t, bucket)

    s, e = align(start, False), align(end, True)
    out: list[Segment] = []

    def split(a: datetime, b: datetime, remaining: Sequence[int]) -> None:
        if a >= b:
            return
        level = remaining[0]
        if level == MINUTE:
            out.append((MINUTE, a, b))
            return
        c0, c1 = _ceil(a, level), _floor(b, level)
        if c0 < c1:
            out.append((level, c0, c1))
            split(a, c0, remaining[1:])
            split(c1, b, remaining[1:])
        else:
            split(a, b, remaining[1:])

    split(s, e, levels)
    return s, e, out


#: Public names for pages that read a window the way showback does (frontend/showback_data.py).
segments = _segments


_USAGE_SUMS = {
    "allocated": "allocated_gpu_seconds", "active": "active_gpu_seconds", "productive": "productive_gpu_seconds",
    "lost": "lost_gpu_seconds", "cost": "cost_usd", "lost_cost": "lost_cost_usd", "tokens": "retained_tokens",
    "token_cost": "token_cost_usd",
}


def _sum_segments(model: Any, segments: Sequence[Segment], keys: Sequence[str], sums: dict[str, str],
                  team_ids: Iterable[int] | None) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Σ per key over the segments: one aggregate per segment, joined with UNION ALL (one round
    trip).

    Each segment names its bucket starts one by one (`start = ANY(...)`) rather than as a range:
    the minute rows crowd the recent end of the `start` histogram, so a range over recent hours
    is overestimated a hundredfold and planned as a sequential scan, while a list of starts is
    estimated from the column's distinct count and read through the rollup index."""
    group = list(keys) or ["bucket"]  # no key: one row per segment, merged under ()
    parts = []
    for bucket, a, b in segments:
        qs = model.objects.filter(in_bucket(bucket, a, b))
        if team_ids is not None:
            qs = qs.filter(team_id__in=list(team_ids))
        parts.append(qs.order_by().values(*group).annotate(**{k: Sum(v) for k, v in sums.items()}))
    if not parts:
        return {}
    query = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    width = len(keys)
    merged: dict[tuple[Any, ...], dict[str, Any]] = {}
    for values in _rows(query, [*group, *sums]):
        key = values[:width] if width else ()
        into = merged.get(key)
        if into is None:
            into = merged[key] = dict(zip(keys, key, strict=True))
        for name, value in zip(sums, values[len(group):], strict=True):
            if value is not None:
                into[name] = into.get(name, 0) + value
    return merged


def _rows(query: Any, columns: Sequence[str]) -> Iterable[tuple[Any, ...]]:
    """A `values()` query's rows as tuples in `columns` order (its fields, then its
    annotations). On PostgreSQL, as the driver gives them: Django's per-value converters cost
    ~25 ms on a week by job (8,000 rows), and PostgreSQL's SUM already gives Decimal for
    decimal and bigint columns, float for float ones. Elsewhere (the SQLite demo, whose sums of
    decimals are floats) through Django, which makes them Decimal."""
    if connection.vendor != "postgresql":
        return (tuple(row[c] for c in columns) for row in query)
    sql, params = query.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def accounting_began(before: datetime | None = None) -> datetime | None:
    """The first instant the rollups cover: the fleet's earliest capacity row, to the minute
    where its minute rows are still kept (else the hour, else the day: retention keeps day rows
    for ever). None before the first run. With `before`, None as well when the accounting began
    a day or more before it. One query: each bucket's first row, read from the start of its
    index (`fleet_rollup_unique_cell`)."""
    def first_of(bucket: int) -> Any:
        return Subquery(FleetRollup.objects.filter(bucket=bucket).order_by("start").values("start")[:1])

    firsts = (FleetRollup.objects.filter(bucket=DAY).order_by("start").values("start")
              .annotate(hour=first_of(HOUR), minute=first_of(MINUTE)).first())
    if firsts is None:
        return None
    first: datetime = firsts["start"]
    if before is not None and first + timedelta(days=1) <= before:
        return None
    # a finer bucket refines the start only within the coarser one's first row
    for bucket, finer in ((DAY, firsts["hour"]), (HOUR, firsts["minute"])):
        if finer is None or not first <= finer < first + timedelta(seconds=bucket):
            break
        first = finer
    return first


def rolled_until() -> datetime | None:
    return AccountingCursor.objects.filter(name=CURSOR_NAME).values_list("rolled_until", flat=True).first()


_UNREAD = object()


def rolled_window(window: Window, rolled: datetime | None | object = _UNREAD) -> Window:
    """A relative window (`30m`, `24h`, `7d`) as showback and the utilization series read it:
    exactly its length, ending on the last whole minute rolled (`rolled`: the cursor's
    rolled_until, read here when not given: one query). "Last 24 hours" from now − 24 h to the
    last whole minute rolled covered 23 h 59 min whenever the rollup was inside a minute behind
    (a 30m window 29 minutes: 3 % short). A window of fixed instants (`today`, a month,
    `start,end`), or one the rollup has not reached yet, is returned as it is."""
    if window.length is None:
        return window
    until = rolled_until() if rolled is _UNREAD else rolled
    if not isinstance(until, datetime):
        return window
    covered = floor_to(until, MINUTE)
    if covered >= window.end:
        return window
    return Window(covered - window.length, covered, window.label, window.length)


def showback(window: Window, group_by: str, access: Any, now: datetime) -> Showback:
    """Cost and tiers per team, project, job or priority class over `window`.

    `access` is services.access.Access: finance and admins read every team and the fleet's
    `__idle__`; members read their own teams only (and no fleet figures). Whole months and days
    come from the job-less group rows (job grouping: from the jobs' day rows), the partial
    hours and minutes at the ends from the jobs' hour and minute rows."""
    if group_by not in GROUP_BY:
        raise AccountingQueryError("group_by", f"'{group_by}' is not a grouping: use one of {', '.join(GROUP_BY)}.")
    reads_all = bool(access.is_admin or access.is_finance)
    if not reads_all and not access.team_ids:
        raise AccountingQueryError("team", "Only members of a team, finance and admins read showback.")
    rolled = rolled_until()
    # The report ends on the last whole minute rolled: a minute rolled only in part grows at
    # the next run, so the same start,end read again (the page's CSV link) would cover more.
    covered = floor_to(rolled, MINUTE) if rolled is not None else None
    window = rolled_window(window, rolled)
    if covered is None or covered <= window.start:
        # Nothing of the window rolled whole yet: an empty report, not the minute rolled in part.
        start = end = floor_to(window.start, MINUTE)
        segments, plain = [], []
    else:
        start, end, segments = _segments(window.start, min(window.end, covered), now, (MONTH, DAY, HOUR, MINUTE))
        _, _, plain = _segments(window.start, min(window.end, covered), now, (DAY, HOUR, MINUTE))
    if covered is not None and end > covered:
        # Never before the start: a window starting in the seconds not rolled yet is empty, not
        # negative (it read "minutes": -0.03 with an end before its start).
        end = max(covered, start)
    team_ids = None if reads_all else access.team_ids
    entries = [_entry(group_by, s) for s in _group_sums(group_by, segments, plain, team_ids).values()]
    idle_by_team: dict[int, tuple[Decimal, Decimal]] = {}
    borrowed_by_team: dict[int, Decimal] = defaultdict(Decimal)
    reserved_by_type: dict[int, tuple[Decimal, Decimal]] = {}
    type_names: dict[int, str] = {}
    for (team_id, gpu_type_id, type_name), row in _sum_segments(
        QuotaRollup, plain, ["team_id", "gpu_type_id", "gpu_type__name"],
        {"gpu_s": "idle_gpu_seconds", "usd": "idle_cost_usd", "borrowed": "borrowed_gpu_seconds"}, team_ids,
    ).items():
        type_names[gpu_type_id] = type_name
        borrowed_by_team[team_id] += row.get("borrowed") or Decimal(0)
        gpu_s, usd = row.get("gpu_s") or Decimal(0), row.get("usd") or Decimal(0)
        for into, key in ((idle_by_team, team_id), (reserved_by_type, gpu_type_id)):
            was = into.get(key, (Decimal(0), Decimal(0)))
            into[key] = (was[0] + gpu_s, was[1] + usd)
    # By team, every team the reader may read has a row, $0.00 where it used nothing: a team
    # missing from the report read as left out, not as a team that cost nothing (until 7 Dec
    # only teams that used GPUs or had a guarantee were listed). Their names in the same query.
    every_team = _team_names(None if reads_all else access.team_ids) if group_by == "team" else None
    if every_team is not None:
        seen = {e.properties["team_id"] for e in entries}
        for team_id in (set(idle_by_team) | set(every_team)) - seen:
            entries.append(ShowbackEntry(key=str(team_id), name=str(team_id), properties={"team_id": team_id}))
        for entry in entries:
            gpu_s, usd = idle_by_team.get(entry.properties["team_id"], (Decimal(0), Decimal(0)))
            entry.idle_reserved_gpu_seconds, entry.idle_reserved_usd = gpu_s, usd
            entry.borrowed_gpu_seconds = borrowed_by_team.get(entry.properties["team_id"], Decimal(0))
    _name_entries(group_by, entries, every_team)
    entries.sort(key=lambda e: (-e.cost_usd, e.name))
    idle = capacity = capacity_cost = None
    by_type: list[IdleByGpuType] = []
    unpriced: list[Unpriced] = []
    if reads_all:
        fleet: dict[str, Decimal] = defaultdict(Decimal)
        # Per GPU type and capacity tier (the tiers: for GPU time no rate priced, `_unpriced`).
        per_tier = _sum_segments(FleetRollup, plain, ["gpu_type_id", "gpu_type__name", "capacity_tier"], {
            "capacity": "capacity_gpu_seconds", "capacity_cost": "capacity_cost_usd",
            "allocated": "allocated_gpu_seconds", "cost": "cost_usd"}, None)
        per_type: dict[tuple[int, str], dict[str, Decimal]] = defaultdict(lambda: defaultdict(Decimal))
        for (gpu_type_id, type_name, _), row in per_tier.items():
            for name in ("capacity", "capacity_cost", "allocated", "cost"):
                fleet[name] += row.get(name) or Decimal(0)
                per_type[(gpu_type_id, type_name)][name] += row.get(name) or Decimal(0)
        capacity = fleet["capacity"]
        capacity_cost = fleet["capacity_cost"]
        idle = ShowbackEntry(key=IDLE, name=IDLE, properties={}, kind="idle")
        idle.idle_gpu_seconds = capacity - fleet["allocated"]
        idle.cost_usd = capacity_cost - fleet["cost"]
        type_names.update({key[0]: key[1] for key in per_type})
        by_type = _idle_by_gpu_type({key[0]: row for key, row in per_type.items()}, reserved_by_type, type_names)
        unpriced = _unpriced(per_tier, start, end, now)
    began = accounting_began(before=start) if rolled is not None else None
    # A member's team rows are apportioned to the cent beside every other team, as finance's
    # report apportions them, so the team reads what it is charged (`_beside_other_teams`).
    other_teams = (_other_teams(segments, plain, access.team_ids)
                   if not reads_all and group_by in ("team", "project", "job") else [])
    return Showback(
        other_teams=other_teams,
        accounting_began=began if began is not None and start < began else None,
        window=window, start=start, end=end, group_by=group_by, entries=entries, idle=idle,
        capacity_gpu_seconds=capacity, capacity_cost_usd=capacity_cost, rolled_until=rolled,
        idle_reserved_gpu_seconds_total=sum((v[0] for v in idle_by_team.values()), Decimal(0)),
        idle_reserved_usd_total=sum((v[1] for v in idle_by_team.values()), Decimal(0)),
        idle_by_gpu_type=by_type, unpriced=unpriced,
    )


def _group_sums(group_by: str, segments: Sequence[Segment], plain: Sequence[Segment],
                team_ids: Iterable[int] | None) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The usage sums per group over the window: whole months and days from the job-less group
    rows (by job: the jobs' day rows), the hours and minutes at the ends from the jobs' rows."""
    keys = list(GROUP_COLUMNS[group_by])
    if group_by == "job":
        return _sum_segments(UsageRollup, plain, keys, _USAGE_SUMS, team_ids)
    coarse = [seg for seg in segments if seg[0] in (MONTH, DAY)]
    fine = [seg for seg in segments if seg[0] in (HOUR, MINUTE)]
    merged = _sum_segments(GroupRollup, coarse, keys, _USAGE_SUMS, team_ids)
    for key, row in _sum_segments(UsageRollup, fine, keys, _USAGE_SUMS, team_ids).items():
        into = merged.setdefault(key, {k: row[k] for k in keys})
        for name in _USAGE_SUMS:
            into[name] = into.get(name, 0) + row.get(name, 0)
    return merged


def _other_teams(segments: Sequence[Segment], plain: Sequence[Segment], own: Iterable[int]) -> list[ShowbackEntry]:
    """The team rows of every team but `own` (a member's), with their idle guarantees, as
    finance's team report has them: only to apportion the member's cents among them, never shown."""
    own = set(own)
    entries = {s["team_id"]: _entry("team", s) for s in _group_sums("team", segments, plain, None).values()
               if s["team_id"] not in own}
    for (team_id,), row in _sum_segments(QuotaRollup, plain, ["team_id"],
                                         {"gpu_s": "idle_gpu_seconds", "usd": "idle_cost_usd"}, None).items():
        if team_id in own:
            continue
        entry = entries.setdefault(team_id, ShowbackEntry(key=str(team_id), name=str(team_id),
                                                          properties={"team_id": team_id}))
        entry.idle_reserved_gpu_seconds = row.get("gpu_s") or Decimal(0)
        entry.idle_reserved_usd = row.get("usd") or Decimal(0)
    out = list(entries.values())
    _name_entries("team", out)
    return out


@dataclass(frozen=True)
class Unpriced:
    """GPU time of one GPU type and capacity tier in a window before that pair had any
    `PriceRate`: the rollup counts it at $0 (and logs "usage without a price"), so the report
    says so instead of showing a cheap fleet. `priced_from`: its first rate, None for none."""

    gpu_type: str
    capacity_tier: str
    capacity_gpu_seconds: Decimal
    allocated_gpu_seconds: Decimal
    priced_from: datetime | None


def _unpriced(per_tier: dict[tuple[Any, ...], dict[str, Any]], start: datetime, end: datetime,
              now: datetime) -> list[Unpriced]:
    """The fleet's GPU time in [start, end) before its (GPU type, tier)'s first rate, per pair,
    from the window's fleet sums per (type id, type name, tier). A first rate inside the window
    counts the rows before it (aligned down to the rows kept, so never more than was unpriced)."""
    if not per_tier:
        return []
    firsts = {(t, tier): first for t, tier, first in PriceRate.objects.order_by().values_list(
        "gpu_type_id", "capacity_tier").annotate(first=Min("effective_from")).values_list(
        "gpu_type_id", "capacity_tier", "first")}
    keys = ["gpu_type_id", "gpu_type__name", "capacity_tier"]
    sums = {"capacity": "capacity_gpu_seconds", "allocated": "allocated_gpu_seconds"}
    out = []
    late: dict[tuple[int, str, str], datetime] = {}
    for (gpu_type_id, name, tier), row in per_tier.items():
        first = firsts.get((gpu_type_id, tier))
        if first is None:
            out.append(Unpriced(name, tier, row.get("capacity") or Decimal(0), row.get("allocated") or Decimal(0), None))
        elif first > start:
            late[(gpu_type_id, name, tier)] = first
    for (gpu_type_id, name, tier), first in late.items():
        a, b, before = _segments(start, min(first, end), now, (DAY, HOUR, MINUTE))
        if b > min(first, end):  # aligned up past the first rate: keep only whole rows before it
            a, b, before = _segments(start, floor_to(min(first, end), MINUTE), now, (DAY, HOUR, MINUTE))
        row = _sum_segments(FleetRollup, before, keys, sums, None).get((gpu_type_id, name, tier), {}) if before else {}
        if row.get("capacity") or row.get("allocated"):
            out.append(Unpriced(name, tier, row.get("capacity") or Decimal(0), row.get("allocated") or Decimal(0),
                                first))
    return sorted(out, key=lambda u: (u.gpu_type, u.capacity_tier))


@dataclass(frozen=True)
class IdleByGpuType:
    """Per GPU type, the two readings of capacity no job used: guarantees idle (priced at the
    type's reserved rate: what a guarantee is worth) and the idle capacity (what the idle nodes
    cost, at their own tiers). They differ where the idle nodes are not reserved capacity."""

    gpu_type: str
    reserved_gpu_seconds: Decimal
    reserved_usd: Decimal
    idle_gpu_seconds: Decimal
    idle_usd: Decimal


def _idle_by_gpu_type(fleet: dict[int, dict[str, Any]], reserved: dict[int, tuple[Decimal, Decimal]],
                      names: dict[int, str]) -> list[IdleByGpuType]:
    out = []
    for gpu_type_id in set(fleet) | set(reserved):
        row = fleet.get(gpu_type_id, {})
        gpu_s, usd = reserved.get(gpu_type_id, (Decimal(0), Decimal(0)))
        out.append(IdleByGpuType(
            gpu_type=names.get(gpu_type_id, str(gpu_type_id)), reserved_gpu_seconds=gpu_s, reserved_usd=usd,
            idle_gpu_seconds=(row.get("capacity") or Decimal(0)) - (row.get("allocated") or Decimal(0)),
            idle_usd=(row.get("capacity_cost") or Decimal(0)) - (row.get("cost") or Decimal(0)),
        ))
    return sorted(out, key=lambda t: t.gpu_type)


#: The rollup columns each grouping sums by (`_group_sums`), whose values make an entry's key.
GROUP_COLUMNS = {"team": ("team_id",), "project": ("team_id", "project_id"), "job": ("job_id",),
                 "priority_class": ("priority_class_id",)}


def entry_key(group_by: str, s: dict[str, Any]) -> str:
    """A group's `ShowbackEntry.key` from its rollup columns (`GROUP_COLUMNS`): the cost chart's
    bars are keyed by it too, so each finds its row's cents whatever the group is named."""
    if group_by == "project":
        return f"{s['team_id']}/{s['project_id'] or ''}"
    return str(s[f"{group_by}_id"])


def _entry(group_by: str, s: dict[str, Any]) -> ShowbackEntry:
    key = entry_key(group_by, s)
    props: dict[str, Any] = {column: s[column] for column in GROUP_COLUMNS[group_by]}
    return ShowbackEntry(
        key=key, name=key, properties=props, allocated_gpu_seconds=s["allocated"] or Decimal(0),
        active_gpu_seconds=s["active"] or Decimal(0), productive_gpu_seconds=s["productive"] or Decimal(0),
        lost_gpu_seconds=s["lost"] or Decimal(0), cost_usd=s["cost"] or Decimal(0),
        lost_cost_usd=s["lost_cost"] or Decimal(0), useful_tokens=float(s["tokens"] or 0.0),
        token_cost_usd=s.get("token_cost") or Decimal(0),
    )


def _team_names(team_ids: Iterable[int] | None) -> dict[int, str]:
    """{team id: name} of `team_ids` (None: every team)."""
    from controlplane.models import Team

    teams = Team.objects.all() if team_ids is None else Team.objects.filter(pk__in=list(team_ids))
    return dict(teams.values_list("pk", "name"))


def _name_entries(group_by: str, entries: list[ShowbackEntry], teams: dict[int, str] | None = None) -> None:
    """Names as people read them; properties as OpenCost labels them. `teams`: the team names,
    when the caller read them already."""
    from controlplane.models import PriorityClass, Project

    if teams is None:
        team_ids = {e.properties.get("team_id") for e in entries} - {None}
        teams = _team_names(team_ids) if team_ids else {}
    if group_by == "team":
        for e in entries:
            e.name = teams.get(e.properties["team_id"], e.key)
            e.properties = {"team_id": e.properties["team_id"], "team": e.name}
    elif group_by == "project":
        ids = {e.properties["project_id"] for e in entries} - {None}
        projects = dict(Project.objects.filter(pk__in=ids).values_list("pk", "name"))
        for e in entries:
            team = teams.get(e.properties["team_id"], "")
            project = projects.get(e.properties["project_id"], UNALLOCATED)
            # Keyed by the pair, escaped: "a/b" + "c" and "a" + "b/c" were both `a/b/c`.
            e.name = project_key(team, None if e.properties["project_id"] is None else project)
            e.properties = {"team_id": e.properties["team_id"], "team": team,
                            "project_id": e.properties["project_id"], "project": project}
    elif group_by == "priority_class":
        names = dict(PriorityClass.objects.filter(pk__in=[e.properties["priority_class_id"] for e in entries])
                     .values_list("pk", "name"))
        for e in entries:
            e.name = names.get(e.properties["priority_class_id"], e.key)
            e.properties = {"priority_class_id": e.properties["priority_class_id"], "priority_class": e.name}
    else:
        jobs = _job_names([e.properties["job_id"] for e in entries])
        for e in entries:
            name, team, project = jobs.get(e.properties["job_id"], ("", "", ""))
            e.name = e.key
            e.properties = {"job_id": e.properties["job_id"], "job": name, "team": team, "project": project}


def _job_names(ids: list[int]) -> dict[int, tuple[str, str, str]]:
    """Job, team and project names ("" for a job without a project) for many jobs at once. On
    PostgreSQL the ids travel as one array parameter (`= ANY(%s)`): a seven-thousand-item IN
    list costs more to build than to run."""
    from django.db import connection

    from controlplane.models import Project, Team

    if connection.vendor != "postgresql":
        return {pk: (name, team, project or "") for pk, name, team, project in
                Job.objects.filter(pk__in=ids).values_list("pk", "name", "team__name", "project__name")}
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT j.id, j.name, t.name, p.name FROM "{Job._meta.db_table}" j JOIN "{Team._meta.db_table}" t '
            f'ON t.id = j.team_id LEFT JOIN "{Project._meta.db_table}" p ON p.id = j.project_id '
            "WHERE j.id = ANY(%s)", [ids],
        )
        return {pk: (name, team, project or "") for pk, name, team, project in cursor.fetchall()}


# ------------------------------------------------------------------------------ presentation

CSV_COLUMNS = (
    "gpu_hours_allocated", "gpu_hours_active", "gpu_hours_productive", "cost_usd", "usd_per_gpu_hour",
    "usd_per_useful_token", "idle_reserved_usd", "preemption_waste_usd",
    # Appended (existing consumers read the columns above by position): the rest of what the
    # /showback/ page shows.
    "usd_per_productive_gpu_hour", "useful_tokens", "usd_per_million_tokens", "preemption_lost_gpu_hours",
    "gpu_hours_idle",
    # Beside $ per useful token (which counts only the jobs that reported tokens): the cost that
    # reported none, in cents, and its share of the row's cost.
    "cost_without_tokens_usd", "share_of_cost_without_tokens",
    # By team (empty in other groupings, as idle_reserved_usd): GPU-hours used beyond the
    # team's guarantee, rounded cumulatively like the other GPU-hour columns.
    "gpu_hours_borrowed",
)
_SHARE_Q = Decimal("0.0001")
#: Appended for `group_by=job`: whose job each row is (the JSON's properties carry them too).
JOB_CSV_COLUMNS = ("job_name", "team", "project")
#: Appended for `group_by=project`: the row's team and its project's own name ("" for the jobs
#: that named none), so a spreadsheet can total by team. The first column keeps the JSON's key,
#: `language/eval`, where readers by position and by the heading `project` find it; a second
#: `project` heading would collide with it (csv.DictReader keeps one, pandas renames it), hence
#: `project_name`, as `job_name` beside `job`. Until 7 Dec only `language/eval` in one cell.
PROJECT_CSV_COLUMNS = ("team", "project_name")
#: Last on every row: the period the report covers, in UTC as the JSON's `window` says it. Only
#: the file name said it before (7 Dec), so months' CSVs pasted together lost whose rows were whose.
PERIOD_CSV_COLUMNS = ("period_start", "period_end")
#: After them, on every row: what the row is (`KINDS`: group, idle or total), so a reader tells
#: the report's own `__idle__` and `TOTAL` rows from a team stored under such a name before the
#: names were refused (7 Dec): until then two rows read `TOTAL` and only their place told which
#: was the total.
KIND_CSV_COLUMNS = ("row_kind",)
CENT = Decimal("0.01")
_HOURS_Q = Decimal("0.0001")
_RATE_Q = Decimal("0.0001")
_TOKEN_RATE_Q = Decimal("0.000000000001")
_MILLION_TOKENS_RATE_Q = Decimal("0.000001")
_MILLION = Decimal(1_000_000)


def hours(gpu_seconds: Decimal) -> Decimal:
    return (gpu_seconds / _HOUR_S).quantize(_HOURS_Q)


#: The GPU-hour columns (the CSV's, less `gpu_hours_` and `_gpu_hours`) and the GPU-seconds each
#: reads. `idle`: capacity no job held, on `__idle__` alone (a group holds none of it).
GPU_HOUR_COLUMNS: dict[str, Callable[[ShowbackEntry], Decimal]] = {
    "allocated": lambda e: e.allocated_gpu_seconds, "active": lambda e: e.active_gpu_seconds,
    "productive": lambda e: e.productive_gpu_seconds, "lost": lambda e: e.lost_gpu_seconds,
    "idle": lambda e: e.idle_gpu_seconds if e.kind == "idle" else _ZERO,
    "borrowed": lambda e: e.borrowed_gpu_seconds or _ZERO,
}
#: GPU-hours as the page says them: two places (`sentences.gpu_hours`); the CSV keeps four.
PAGE_HOURS_Q = HUNDREDTH


def presented_gpu_hours(report: Showback, quantum: Decimal = _HOURS_Q) -> dict[str, dict[str, Decimal]]:
    """GPU-hours per entry (and `__idle__`, `TOTAL`) for each of `GPU_HOUR_COLUMNS`, to `quantum`
    (the CSV's four places, the page's two), rounded cumulatively (`run_text.rounded_cumulatively`,
    the rule of a job's runs) over the groups in the report's order (cost down, then name) and
    then `__idle__`, so each column adds up to its TOTAL, the exact sum rounded once. Each row is
    within a `quantum` of its own rounding, so one of less than a `quantum` can read none (the
    page says a non-zero one "< 0.01": `run_text.share_said`). Until 7 Dec each row was rounded on
    its own: the page read language 4.2 + vision 3.0 above a TOTAL of 7.3, and a CSV's rows could
    be 0.0001 off its TOTAL."""
    rows = [*report.entries, *([report.idle] if report.idle is not None else [])]
    out: dict[str, dict[str, Decimal]] = {r.key: {} for r in rows}
    out[TOTAL] = {}
    for column, seconds in GPU_HOUR_COLUMNS.items():
        shares = rounded_cumulatively([seconds(r) for r in rows], quantum, per=_HOUR_S)
        for r, share in zip(rows, shares, strict=True):
            out[r.key][column] = share
        out[TOTAL][column] = sum(shares, Decimal(0).quantize(quantum))
    return out


#: A per-unit price below a cent as the page says it (`$0.004500`; qm: "< 0.01").
_SMALL_PRICE_Q = Decimal("0.000001")
#: The per-unit prices the page's table and `qm showback` show to the cent.
SHOWN_PRICES: dict[str, Callable[[ShowbackEntry], Decimal | None]] = {
    "usd_per_gpu_hour": lambda e: e.usd_per_gpu_hour,
    "usd_per_productive_gpu_hour": lambda e: e.usd_per_productive_gpu_hour,
}


def shown_price(value: Decimal | None) -> Decimal | None:
    """A per-unit price as it is shown: the exact figure rounded once to the cent (half to
    even), a non-zero one that rounds to none to six places. Rounded from the exact figure here
    only: `qm showback` rounded the API's four places to two, so $2.51499 read $2.51 on the
    page and $2.52 in qm (2.5150 rounded again)."""
    if value is None:
        return None
    cents = value.quantize(CENT, rounding=ROUND_HALF_EVEN)
    return cents if cents or not value else value.quantize(_SMALL_PRICE_Q, rounding=ROUND_HALF_EVEN)


def shown_figures(report: Showback) -> dict[str, dict[str, Decimal | None]]:
    """What the page's table and `qm showback` show per entry (and `__idle__`, `TOTAL`) where a
    figure is rounded for showing, in one place so the two say the same: the GPU-hours of each
    of `GPU_HOUR_COLUMNS` to two places, rounded cumulatively (`presented_gpu_hours`) so they
    add up to TOTAL, a non-zero one whose share rounded to none as its exact figure (said
    "< 0.01": `run_text.share_said`); and the per-unit prices of `SHOWN_PRICES` (`shown_price`).
    The API gives them (`shown` in the JSON) so that qm does not round the API's rounded figures
    again: until 7 Dec it rounded the four places to two, and 1.01495 GPU-hours read 1.01 on the
    page and 1.02 in qm, TOTAL too. Money and tokens are `presented_money`'s and
    `presented_tokens`', already whole cents and tokens everywhere."""
    said = presented_gpu_hours(report, PAGE_HOURS_Q)
    out: dict[str, dict[str, Decimal | None]] = {}
    for entry in [*report.entries, *([report.idle] if report.idle is not None else []), report.total]:
        exact = {column: seconds(entry) / _HOUR_S for column, seconds in GPU_HOUR_COLUMNS.items()}
        if entry.kind == "total":
            exact["idle"] = entry.idle_gpu_seconds / _HOUR_S
        shown: dict[str, Decimal | None] = {
            column: Decimal(share_said(share, exact[column])) for column, share in said[entry.key].items()
        }
        shown.update({name: shown_price(price(entry)) for name, price in SHOWN_PRICES.items()})
        out[entry.key] = shown
    return out


def _fmt(value: Decimal | None, quantum: Decimal) -> str:
    """Plain fixed-point text with exactly `quantum`'s places ("" for no value): never Decimal's
    scientific `1.24355E-7`, and zero as `0.00` like any other cent figure, never `0` or `-0.00`."""
    if value is None:
        return ""
    rounded = value.quantize(quantum)
    return format(abs(rounded) if rounded == 0 else rounded, "f")


def usd_per_million_tokens(entry: ShowbackEntry, per_token: Decimal | None = None) -> Decimal | None:
    """$ per million useful tokens: the page's and the CSV's figure (exact, unrounded).
    `per_token`: the entry's `usd_per_useful_token` when the caller has it already."""
    per_token = per_token if per_token is not None else entry.usd_per_useful_token
    return None if per_token is None else per_token * _MILLION


def presented_tokens(report: Showback) -> dict[str, int]:
    """Useful tokens per entry (and `TOTAL`) as whole tokens, apportioned like the cents (largest
    remainder, ties to the earlier entry) so the rows add up to TOTAL; `__idle__` has none.
    Tokens are floats (progress is pro-rated over sample intervals): integer arithmetic on their
    floors, the rounded exact sum (math.fsum) as the total. By project or job, each team's rows
    add up to the team's tokens in the team report, as its cents do (`_group_cents`)."""
    entries = report.entries
    values = [e.useful_tokens for e in entries]
    if report.group_by in ("project", "job"):
        rows_of = _rows_by_team(report)
        whole = [0] * len(values)
        teams = list(rows_of)
        team_values = [math.fsum(values[i] for i in rows_of[t]) for t in teams]
        team_tokens = (_whole_to(team_values, round(math.fsum(values))) if not report.other_teams else
                       _beside_other_teams(report, _team_rows(report, rows_of, team_values),
                                           lambda p: p.useful_tokens, _whole_tokens))
        for team, tokens in zip(teams, team_tokens, strict=True):
            rows = rows_of[team]
            for i, share in zip(rows, _whole_to([values[i] for i in rows], tokens), strict=True):
                whole[i] = share
    else:
        whole = _beside_other_teams(report, [(e.name, e.cost_usd, e.useful_tokens) for e in entries],
                                    lambda p: p.useful_tokens, _whole_tokens)
    out = {e.key: t for e, t in zip(entries, whole, strict=True)}
    if report.idle is not None:
        out[report.idle.key] = 0
    out[TOTAL] = sum(whole)
    return out


def _whole_tokens(values: Sequence[float]) -> list[int]:
    """Useful tokens as whole tokens adding up to their sum rounded once (`_whole_to`)."""
    return _whole_to(values, round(math.fsum(values)))


def _team_rows(report: Showback, rows_of: dict[str, list[int]], values: Sequence[Any]) -> list[tuple[str, Decimal, Any]]:
    """(team, its exact cost, its value) per team of a report by project or job, in `rows_of`'s
    order: the teams `_beside_other_teams` apportions a column among."""
    return [(team, sum((report.entries[i].cost_usd for i in rows_of[team]), Decimal(0)), value)
            for team, value in zip(rows_of, values, strict=True)]


def _beside_other_teams(report: Showback, teams: Sequence[tuple[str, Decimal, Any]],
                        other_value: Callable[[ShowbackEntry], Any],
                        share: Callable[[list[Any]], list[Any]] = apportion) -> list[Any]:
    """`share` (cents: `apportion`; whole tokens: `_whole_tokens`) of the values of `teams`,
    (name, exact cost, value) each, in the team report's order (cost down, then name).

    For a member's report the values of the teams they do not read (`report.other_teams`,
    `other_value` of each) are shared beside theirs and then left out, so a member's team gets
    the cents finance's report gives it. Alone, a team's cents were rounded on their own: three
    teams of $0.006 cost $0.02 together, shared as $0.01, $0.01 and $0.00 in finance's report,
    while the third team read $0.01 on its own page and CSV (until 7 Dec)."""
    if not report.other_teams:
        return share([value for _, _, value in teams])
    everyone = [(name, cost, value, i) for i, (name, cost, value) in enumerate(teams)]
    everyone += [(o.name, o.cost_usd, other_value(o), None) for o in report.other_teams]
    everyone.sort(key=lambda t: (-t[1], t[0]))
    out: list[Any] = [None] * len(teams)
    for (_, _, _, i), shared in zip(everyone, share([t[2] for t in everyone]), strict=True):
        if i is not None:
            out[i] = shared
    return out


def _whole_to(values: Sequence[float], total: int) -> list[int]:
    """`values` as whole numbers adding up to `total`: the floors, and one more to the largest
    remainders (ties to the earlier value)."""
    whole = [math.floor(v) for v in values]
    units = total - sum(whole)
    if units > 0:
        for i in sorted(range(len(values)), key=lambda i: (whole[i] - values[i], i))[:units]:
            whole[i] += 1
    return whole


def presented_money(report: Showback) -> dict[str, dict[str, Decimal]]:
    """Cents per entry (and `__idle__`, `TOTAL`) for cost, idle reserved and preemption waste,
    apportioned so every column adds up to its TOTAL exactly. TOTAL has idle reserved only by
    team (`shows_idle_reserved`).

    The groups' cents add up to Σ groups rounded once, the same in every grouping of a window
    (`__idle__` takes the rest of TOTAL), and a team's projects or jobs add up to the team's
    cents in the team report (`_group_cents`). Before (5 Dec) one apportionment over the groups
    and `__idle__` together passed a cent between them by grouping: on the demo the teams of a
    window cost $11.51 and its priority classes $11.50 (`__idle__` $9.70 and $9.71), and a
    team's projects could add up to a cent more or less than the team. Cost without tokens is
    part of each row's cost (`_cost_without_tokens`)."""
    entries = report.entries
    idle = report.idle

    def column(value: Any) -> tuple[list[Decimal], Decimal | None]:
        values = [value(e) for e in entries]
        cents = _group_cents(report, value)
        if idle is None:
            return cents, None
        total = (sum(values, Decimal(0)) + value(idle)).quantize(CENT, rounding=ROUND_HALF_EVEN)
        return cents, total - sum(cents, Decimal(0))

    cost, idle_cost = column(lambda r: r.cost_usd)
    waste, idle_waste = column(lambda r: r.lost_cost_usd)
    without = _cost_without_tokens(report, cost)
    # Nothing `__idle__` cost reported tokens: its cost without tokens is its cost, to the cent
    # (rounded as a column of its own, it read $15.85 beside a cost of $15.86 on the demo).
    idle_without = idle_cost
    rows: list[ShowbackEntry] = [*entries, *([idle] if idle is not None else [])]
    reserved = (_beside_other_teams(report, [(r.name, r.cost_usd, r.idle_reserved_usd or Decimal(0)) for r in rows],
                                    lambda o: o.idle_reserved_usd or Decimal(0))
                if shows_idle_reserved(report) else apportion([r.idle_reserved_usd or Decimal(0) for r in rows]))
    if idle is not None:
        cost, waste, without = [*cost, idle_cost], [*waste, idle_waste], [*without, idle_without]
    out = {
        r.key: {"cost_usd": c, "preemption_waste_usd": w, "idle_reserved_usd": i, "cost_without_tokens_usd": n}
        for r, c, w, i, n in zip(rows, cost, waste, reserved, without, strict=True)
    }
    out[TOTAL] = {
        "cost_usd": sum(cost, Decimal(0)),
        "cost_without_tokens_usd": sum(without, Decimal(0)),
        "preemption_waste_usd": sum(waste, Decimal(0)),
    }
    if shows_idle_reserved(report):
        # Idle reserved quota is a team's guarantee, so only the team grouping has the column
        # (`shows_idle_reserved`): by project TOTAL carried the teams' figure over rows that
        # had none, which the page hid and the CSV and qm showed (until 7 Dec).
        out[TOTAL]["idle_reserved_usd"] = sum(reserved, Decimal(0))
    return out


def shows_idle_reserved(report: Showback) -> bool:
    """Whether the report has an idle reserved quota figure: only by team. A guarantee neither
    used nor lent is its team's, no project's, job's or priority class's, so any other grouping
    leaves it out everywhere alike (page, CSV, JSON and qm; the page and qm say to group by team)."""
    return report.group_by == "team"


def _cost_without_tokens(report: Showback, cost: list[Decimal]) -> list[Decimal]:
    """The entries' cents of cost without tokens, within their cents of cost (`cost`, from
    `_group_cents`): every row's cost is its token-reporting cents plus the rest, so a row
    that reported no tokens costs without tokens exactly its cost, one all of whose cost reported
    tokens $0.00, and no row more than its cost.

    The token-reporting cents are a column apportioned like the others, held to each row
    (`_token_cents`). By project or job each team's token-reporting cents are the ones its row
    has in the team report: the rows held to all or nothing take theirs, and the rows with both
    kinds of work share the rest; where a team has no such row (by job, always) its rows' cents
    without tokens can differ from the team report's by the cents its cost's apportionment put
    on its jobs with tokens or without. Before (5 Dec) cost without tokens was a column rounded
    apart from cost: on the demo a job that reported no tokens read a cost of $13.37 and $13.36
    without tokens (100 %)."""
    entries = report.entries
    tokens = [e.token_cost_usd for e in entries]
    if report.group_by not in ("project", "job"):
        shared = _beside_other_teams(report, [(e.name, e.cost_usd, e.token_cost_usd) for e in entries],
                                     lambda o: o.token_cost_usd)
        token_cents = _token_cents(entries, cost, shared)
        return [c - t for c, t in zip(cost, token_cents, strict=True)]
    rows_of = _rows_by_team(report)
    teams = list(rows_of)
    team_entries = [ShowbackEntry(key=t, name=t, properties={},
                                  cost_usd=sum((entries[i].cost_usd for i in rows_of[t]), Decimal(0)),
                                  token_cost_usd=sum((tokens[i] for i in rows_of[t]), Decimal(0)))
                    for t in teams]
    team_cost = [sum((cost[i] for i in rows_of[t]), Decimal(0)) for t in teams]
    team_tokens = _token_cents(team_entries, team_cost, _beside_other_teams(
        report, [(e.name, e.cost_usd, e.token_cost_usd) for e in team_entries], lambda o: o.token_cost_usd))
    token_cents = [Decimal("0.00")] * len(entries)
    for team, team_token_cents in zip(teams, team_tokens, strict=True):
        rows = rows_of[team]
        mixed = [i for i in rows if tokens[i] and tokens[i] != entries[i].cost_usd]
        for i in rows:
            if tokens[i] and tokens[i] == entries[i].cost_usd:
                token_cents[i] = cost[i]
        rest = team_token_cents - sum((token_cents[i] for i in rows), Decimal(0))
        for i, share in zip(mixed, _apportion_to([tokens[i] for i in mixed], rest), strict=True):
            token_cents[i] = min(max(share, Decimal("0.00")), cost[i])
    return [c - t for c, t in zip(cost, token_cents, strict=True)]


def _token_cents(entries: Sequence[ShowbackEntry], cost: Sequence[Decimal], cents: Sequence[Decimal]) -> list[Decimal]:
    """The token-reporting cents of each entry (`cents`, apportioned), held to its row: none
    for a row that reported no tokens, all of its `cost` for one whose cost all reported tokens,
    and never below none or above its cost."""
    out = []
    for entry, c, t in zip(entries, cost, cents, strict=True):
        if not entry.token_cost_usd:
            t = Decimal("0.00")
        elif entry.token_cost_usd == entry.cost_usd:
            t = c
        out.append(min(max(t, Decimal("0.00")), c))
    return out


def _group_cents(report: Showback, value: Callable[[ShowbackEntry], Decimal]) -> list[Decimal]:
    """One money column of `report.entries` in cents, adding up to Σ values rounded once. By
    project or job, each team's rows add up to the cents its row has in the team report of the
    same window: the teams are apportioned first, in the team report's order (cost down, then
    name; `showback`), then each team's cents among its rows. A member's teams get the cents
    finance's report gives them (`_beside_other_teams`)."""
    values = [value(e) for e in report.entries]
    if report.group_by not in ("project", "job"):
        return _beside_other_teams(report, [(e.name, e.cost_usd, v) for e, v in zip(report.entries, values,
                                                                                      strict=True)], value)
    rows_of = _rows_by_team(report)
    teams = list(rows_of)
    out = [Decimal(0)] * len(values)
    team_cents = _beside_other_teams(
        report, _team_rows(report, rows_of, [sum((values[i] for i in rows_of[t]), Decimal(0)) for t in teams]), value)
    for team, cents in zip(teams, team_cents, strict=True):
        rows = rows_of[team]
        for i, share in zip(rows, _apportion_to([values[i] for i in rows], cents), strict=True):
            out[i] = share
    return out


def _rows_by_team(report: Showback) -> dict[str, list[int]]:
    """The indexes of `report.entries` (by project or job) per team, the teams in the team
    report's order (cost down, then name: `showback`), where ties in an apportionment go."""
    rows_of: dict[str, list[int]] = defaultdict(list)
    for i, entry in enumerate(report.entries):
        rows_of[str(entry.properties.get("team", ""))].append(i)
    cost = {t: sum((report.entries[i].cost_usd for i in rows), Decimal(0)) for t, rows in rows_of.items()}
    return {t: rows_of[t] for t in sorted(rows_of, key=lambda t: (-cost[t], t))}


def _apportion_to(values: Sequence[Decimal], total: Decimal) -> list[Decimal]:
    """`values` in cents adding up to `total`: the floors, and a cent more to the largest
    remainders (ties to the earlier value), as `apportion` does. A row of nothing never takes a
    cent. For a `total` within a cent of the values' sum that is all; what is left of a team's
    token-reporting cents for its rows with both kinds of work (`_cost_without_tokens`) can be
    further off, and then the remainders take a second cent, or the smallest give one back
    (never below nothing)."""
    floors = [v.quantize(CENT, rounding=ROUND_FLOOR) for v in values]
    units = int((total - sum(floors, Decimal(0))) / CENT)
    order = sorted((i for i in range(len(values)) if values[i]), key=lambda i: (floors[i] - values[i], i))
    while units > 0 and order:
        for i in order[:units]:
            floors[i] += CENT
        units -= min(units, len(order))
    while units < 0:
        givers = [i for i in reversed(order) if floors[i] > 0][:-units]
        if not givers:
            break
        for i in givers:
            floors[i] -= CENT
        units += len(givers)
    return floors


#: A row's cost split by what its GPU time did (`cost_by_tier`), each part the share of its
#: allocated GPU-seconds: productive, active but not productive, allocated but idle on the device.
COST_TIERS: dict[str, Callable[[ShowbackEntry], Decimal]] = {
    "productive": lambda e: e.productive_gpu_seconds,
    "active_only": lambda e: e.active_gpu_seconds - e.productive_gpu_seconds,
    "allocated_only": lambda e: e.allocated_gpu_seconds - e.active_gpu_seconds,
}


def cost_by_tier(entry: ShowbackEntry, cents: Decimal) -> dict[str, Decimal]:
    """The row's cents (`presented_money`'s cost) split over `COST_TIERS` in proportion to their
    GPU-seconds (the group's own average price applied to each tier), shared out so the parts
    add up to the row's cost ("Where the money went"). Until 7 Dec each part was rounded on its
    own: three equal thirds of $10.00 read $3.33 each, $9.99 beside the table's $10.00."""
    allocated = entry.allocated_gpu_seconds
    exact = [entry.cost_usd * seconds(entry) / allocated if allocated else _ZERO for seconds in COST_TIERS.values()]
    return dict(zip(COST_TIERS, _apportion_to(exact, cents), strict=True))


def cost_over_time(report: Showback, exact: dict[str, dict[datetime, Decimal]]) -> dict[str, list[tuple[datetime, Decimal]]]:
    """A cost chart's bars in cents: `exact` is each group's exact cost per bucket of time, by the
    report's entry keys (`ShowbackEntry.key`); each group's cents in the report
    (`presented_money`) are shared out over its buckets in proportion, so its bars add up to its
    row in the table, the CSV, the JSON and `qm showback`, to the cent. A bucket's stack is the
    sum of its groups' bars, never rounded again. Until 7 Dec each bar was rounded on its own:
    two hours at $2.145 read $2.15 + $2.15 = $4.30 beside a row of $4.29. A group the report has
    no row for (none: both read the same rollups over the same window) is rounded on its own."""
    money = presented_money(report)
    out: dict[str, list[tuple[datetime, Decimal]]] = {}
    for key, points in exact.items():
        times = sorted(points)
        values = [points[t] for t in times]
        cents = money[key]["cost_usd"] if key in money else apportion(values)
        out[key] = list(zip(times, _apportion_to(values, cents) if key in money else cents, strict=True))
    return out


def showback_table(report: Showback) -> tuple[list[str], list[list[Cell]]]:
    """Finance's table, the header and its rows: one row per group, `__idle__` for fleet
    readers, and a final TOTAL row whose money and token columns equal the sums of the rows above
    (money to the cent). It carries every figure the /showback/ page shows. The CSV
    (`showback_csv`) and the workbook (`showback_xlsx`) are both written from these rows."""
    money = presented_money(report)
    tokens = presented_tokens(report)
    fleet = report.idle is not None
    by_job, by_project = report.group_by == "job", report.group_by == "project"
    header = [report.group_by, *CSV_COLUMNS, *(JOB_CSV_COLUMNS if by_job else ()),
              *(PROJECT_CSV_COLUMNS if by_project else ()), *PERIOD_CSV_COLUMNS, *KIND_CSV_COLUMNS]
    period = (iso(report.start), iso(report.end))

    gpu_hours = presented_gpu_hours(report)

    def row(entry: ShowbackEntry, reserved: Decimal | None, fleet_row: bool) -> list[Cell]:
        # Fixed places per column: hours 4, cents 2, $/GPU-hour 4, $/token 12, $/1M tokens 6, tokens 0.
        # GPU-hours are `presented_gpu_hours`', which add up to TOTAL as the cents do.
        m = money[entry.key]
        h = gpu_hours[entry.key]

        def hours(column: str) -> Figure | None:
            return figure(_fmt(h[column], _HOURS_Q), HOURS_4)

        def usd(value: Decimal | None, quantum: Decimal = CENT, number_format: str = USD) -> Figure | None:
            return figure(_fmt(value, quantum), number_format)

        per_token = entry.usd_per_useful_token
        # Names are `str` cells: text a spreadsheet shows, never a formula (spreadsheet_cells);
        # a job's name is anyone's free text.
        return [
            entry.name, hours("allocated"), hours("active"),
            hours("productive"), usd(m["cost_usd"]), usd(entry.usd_per_gpu_hour, _RATE_Q, USD_4),
            usd(per_token, _TOKEN_RATE_Q, USD_12), usd(reserved),
            usd(m["preemption_waste_usd"]), usd(entry.usd_per_productive_gpu_hour, _RATE_Q, USD_4),
            Figure(str(tokens[entry.key]), WHOLE),
            usd(usd_per_million_tokens(entry, per_token), _MILLION_TOKENS_RATE_Q, USD_6),
            hours("lost"), hours("idle") if fleet_row else None,
            usd(m["cost_without_tokens_usd"]), figure(_fmt(entry.share_without_tokens, _SHARE_Q), SHARE_4),
            hours("borrowed") if shows_idle_reserved(report) and entry.kind != "idle" else None,
            *((str(entry.properties.get("job", "")), str(entry.properties.get("team", "")),
               str(entry.properties.get("project", ""))) if by_job else ()),
            *((str(entry.properties.get("team", "")), _project_name(entry)) if by_project else ()),
            *period, entry.kind,
        ]

    # Rows in name order; job rows in id order (as text, job 10 came between 1 and 2).
    def order(e: ShowbackEntry) -> tuple[int, int, str]:
        return (0, int(e.name), "") if by_job and e.name.isascii() and e.name.isdigit() else (1, 0, e.name)

    rows = []
    for entry in sorted(report.entries, key=order):
        reserved = money[entry.key]["idle_reserved_usd"] if shows_idle_reserved(report) else None
        rows.append(row(entry, reserved, fleet))
    if report.idle is not None:
        rows.append(row(report.idle, None, True))
    rows.append(row(report.total, money[TOTAL].get("idle_reserved_usd"), fleet))
    return header, rows


def showback_csv(report: Showback) -> str:
    """Finance's CSV: `showback_table`'s header and rows, each cell as `csv_text` writes it."""
    import csv
    import io

    header, rows = showback_table(report)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows([csv_text(cell) for cell in row] for row in rows)
    return buffer.getvalue()


def showback_xlsx(report: Showback, now: datetime) -> bytes:
    """Finance's workbook: `showback_table`'s rows, the very rows of the CSV, each cell typed
    (services/excel_workbook.py), and an "About" sheet saying the period, the prices and when
    it was made."""
    from controlplane.services.excel_workbook import workbook

    header, rows = showback_table(report)
    about = [
        ("Report", f"Showback by {report.group_by.replace('_', ' ')}"),
        ("Period start (UTC)", iso(report.start)),
        ("Period end (UTC)", iso(report.end)),
        ("Window asked", report.window.label),
        ("Currency", "USD"),
        ("Prices", "Each GPU-second at the price per GPU-hour of its node's GPU type and capacity tier in force "
                   "at that instant; money apportioned to the cent so the rows add up to TOTAL, as in the CSV."),
        ("Rows", "One per group, then __idle__ (capacity no job held, for finance and admins) and TOTAL; "
                 "row_kind says which is which."),
        ("Generated (UTC)", iso(now.replace(microsecond=0))),
    ]
    if report.unpriced:
        about.append(("Unpriced GPU time", "Some GPU time in the period had no price for its GPU type and tier "
                                           "and counts $0.00 (the showback page names it)."))
    if report.accounting_began is not None:
        about.append(("Accounting began (UTC)", f"{iso(report.accounting_began)}: nothing before was recorded."))
    return workbook("Showback", header, rows, about)


def _project_name(entry: ShowbackEntry) -> str:
    """A project row's project as the job CSV names it: "" for its team's jobs that named none
    (the first column's `vision/__unallocated__`); `__idle__` and TOTAL have none. Told by the
    project's id, not its name: a project stored as `__unallocated__` before the name was refused
    is that project, and read "" like the jobs without one (until 7 Dec)."""
    if entry.properties.get("project_id") is None:
        return ""
    return str(entry.properties.get("project", ""))


def data_key(entry: ShowbackEntry, group_by: str) -> str:
    """An allocation's key in the JSON's `data`: its name (OpenCost's), but for a group whose
    name is the key of one of the report's own rows, `__idle__` (the idle capacity) or
    `team/__unallocated__` (a team's jobs without a project), which keeps it: a team or project
    stored under such a name before the names were refused (7 Dec) is keyed by its name and id,
    `__idle__ (team 7)`. Until then it was overwritten there by that row: the team's cost was
    missing from `data`, which no longer added up to `totals`, and from `qm showback`."""
    if entry.kind != "group":
        return entry.name
    if group_by == "project":
        project_id = entry.properties.get("project_id")
        if project_id is not None and entry.properties.get("project") == UNALLOCATED:
            return f"{entry.name} (project {project_id})"
        return entry.name
    if group_by in ("team", "priority_class") and entry.name == IDLE:
        return f"{entry.name} ({group_by.replace('_', ' ')} {entry.properties[f'{group_by}_id']})"
    return entry.name


def download_filename(report: Showback, extension: str = "csv") -> str:
    """The CSV's (or the workbook's, `xlsx`) file name, naming the period it covers: a month it covers whole by its name
    (`2026-11`), any other period by the instants the report covers, in UTC (as every row's
    `period_start` and `period_end` do, from 7 Dec), a month still running included: until 7 Dec
    `?month=2026-12` read on the 7th was `showback-team-2026-12.csv`, the whole month's name on
    six days of it. Before 2 Dec a download of the last 7 days was `showback-team-7d.csv`
    whenever it was made, and nothing in the file said which seven days."""
    label = report.window.label
    whole_month = (re.fullmatch(r"\d{4}-\d{2}", label) is not None and report.start == floor_month(report.start)
                   and report.end == next_month(report.start))
    if not whole_month:
        label = f"{report.start:%Y-%m-%dT%H%M%SZ}_{report.end:%Y-%m-%dT%H%M%SZ}"
    return f"showback-{report.group_by}-{label}.{extension}"


def showback_json(report: Showback) -> dict[str, Any]:
    """The report in OpenCost's allocation shape (`/allocation?window=…&aggregate=…`): `data` is
    a list of allocation sets keyed by name (`data_key`), each allocation with `window`, `gpuHours`,
    `gpuCost` and `totalCost`, plus our tiers and its `kind`; `__idle__` is the unallocated
    capacity, `totals` (kind `total`) the sum. Money is rounded to
    the cent with the same apportionment as the CSV, so the entries add up to `totals`."""
    money = presented_money(report)
    tokens = presented_tokens(report)
    shown = shown_figures(report)
    if not shows_idle_reserved(report):
        # Borrowed GPU-hours are a team's, as its guarantee is: null in other groupings.
        for figures in shown.values():
            figures["borrowed"] = None
    window = {"start": iso(report.start), "end": iso(report.end)}
    minutes = (report.end - report.start).total_seconds() / 60
    allocations: dict[str, Any] = {}
    for entry in report.entries:
        key = data_key(entry, report.group_by)
        allocations[key] = _allocation(entry, money[entry.key], tokens[entry.key], window, minutes)
        allocations[key]["shown"] = _shown_json(shown[entry.key], JSON_SHOWN)
    if report.idle is not None:
        idle = report.idle
        allocations[IDLE] = {
            "name": IDLE, "kind": idle.kind, "properties": {}, "window": window, "start": window["start"], "end": window["end"],
            "minutes": minutes, "gpuHours": float(hours(idle.idle_gpu_seconds)),
            "gpuCost": float(money[IDLE]["cost_usd"]), "totalCost": float(money[IDLE]["cost_usd"]),
            "costWithoutTokens": float(money[IDLE]["cost_without_tokens_usd"]),
            "shareOfCostWithoutTokens": _share(idle.cost_without_tokens_usd, idle.cost_usd),
            # Its `gpuHours` is the idle capacity's: shown, the idle column's share.
            "shown": _shown_json(shown[IDLE], {"gpuHours": "idle"}),
        }
    total = report.total
    totals = _allocation(total, money[TOTAL], tokens[TOTAL], window, minutes)
    totals["idleReservedGpuHours"] = (float(hours(report.idle_reserved_gpu_seconds_total))
                                      if shows_idle_reserved(report) else None)
    totals["shown"] = _shown_json(shown[TOTAL], JSON_SHOWN)
    if report.capacity_gpu_seconds is not None:
        totals["capacityGpuHours"] = float(hours(report.capacity_gpu_seconds))
        totals["idleGpuHours"] = float(hours(total.idle_gpu_seconds))
        totals["shown"].update(_shown_json(shown[TOTAL], {"idleGpuHours": "idle"}))
    extra: dict[str, Any] = {}
    if report.idle is not None:
        # GPU time no rate priced: counted at $0 above (fleet readers; [] when every hour had a price).
        extra["unpriced"] = [{
            "gpuType": u.gpu_type, "capacityTier": u.capacity_tier,
            "capacityGpuHours": float(hours(u.capacity_gpu_seconds)),
            "allocatedGpuHours": float(hours(u.allocated_gpu_seconds)),
            "pricedFrom": iso(u.priced_from) if u.priced_from else None,
        } for u in report.unpriced]
    return {
        "code": 200,
        "window": window,
        "requestedWindow": report.window.label,
        "aggregate": report.group_by,
        "currency": "USD",
        "rolledUntil": iso(report.rolled_until) if report.rolled_until else None,
        # The window starts before the accounting began: nothing before this instant was recorded.
        "accountingBegan": iso(report.accounting_began) if report.accounting_began else None,
        "data": [allocations],
        "totals": totals,
        **extra,
    }


#: An allocation's `shown`: its figures (by their JSON names) as the page and qm show them,
#: from `shown_figures` (by its names).
JSON_SHOWN = {
    "gpuHours": "allocated", "gpuHoursActive": "active", "gpuHoursProductive": "productive",
    "preemptionLostGpuHours": "lost", "usdPerGpuHour": "usd_per_gpu_hour",
    "usdPerProductiveGpuHour": "usd_per_productive_gpu_hour", "borrowedGpuHours": "borrowed",
}


def _shown_json(shown: dict[str, Decimal | None], names: dict[str, str]) -> dict[str, float | None]:
    figures = {key: shown[name] for key, name in names.items()}
    return {key: None if value is None else float(value) for key, value in figures.items()}


def _number(value: Decimal | None, quantum: Decimal) -> float | None:
    return None if value is None else float(value.quantize(quantum))


def _allocation(entry: ShowbackEntry, money: dict[str, Decimal], tokens: int, window: dict[str, str],
                minutes: float) -> dict[str, Any]:
    number = _number
    per_token = entry.usd_per_useful_token
    share = entry.share_without_tokens
    allocated = entry.allocated_gpu_seconds
    cost = float(money["cost_usd"])
    return {
        "name": entry.name,
        # What the entry is (`KINDS`), where its name may be a team's stored as TOTAL or __idle__.
        "kind": entry.kind,
        "properties": entry.properties,
        "window": window,
        "start": window["start"],
        "end": window["end"],
        "minutes": minutes,
        "gpuHours": float(hours(allocated)),
        "gpuHoursActive": float(hours(entry.active_gpu_seconds)),
        "gpuHoursProductive": float(hours(entry.productive_gpu_seconds)),
        "gpuEfficiency": _share(entry.active_gpu_seconds, allocated),
        "gpuProductiveEfficiency": _share(entry.productive_gpu_seconds, allocated),
        "gpuCost": cost,
        "totalCost": cost,
        "usdPerGpuHour": number(entry.usd_per_gpu_hour, _RATE_Q),
        "usdPerProductiveGpuHour": number(entry.usd_per_productive_gpu_hour, _RATE_Q),
        "usefulTokens": tokens,
        "usdPerUsefulToken": number(per_token, _TOKEN_RATE_Q),
        "usdPerMillionTokens": number(usd_per_million_tokens(entry, per_token), _MILLION_TOKENS_RATE_Q),
        "costWithoutTokens": float(money["cost_without_tokens_usd"]),
        "shareOfCostWithoutTokens": None if share is None else round(float(share), 6),
        "idleReservedCost": float(money["idle_reserved_usd"]) if entry.idle_reserved_usd is not None
        or (entry.kind == "total" and "idle_reserved_usd" in money) else None,
        "preemptionLostGpuHours": float(hours(entry.lost_gpu_seconds)),
        "preemptionWasteCost": float(money["preemption_waste_usd"]),
        "borrowedGpuHours": None if entry.borrowed_gpu_seconds is None else float(hours(entry.borrowed_gpu_seconds)),
    }


def _share(part: Decimal, whole: Decimal) -> float | None:
    return round(float(part / whole), 6) if whole else None

