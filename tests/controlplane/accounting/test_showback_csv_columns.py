"""Finance's showback CSV carries every figure the /showback/ page shows, in plain fixed-point
notation with a fixed number of places per column, and a TOTAL row that adds up.

The report is built by hand (the accounting service's own `Showback` and `ShowbackEntry`), so
every expected figure is worked out in the test; the page-versus-CSV check over real rollups is
tests/frontend/test_showback_csv_matches_page.py.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, datetime
from decimal import Decimal

from controlplane.services import showback
from controlplane.services.showback import Showback, ShowbackEntry, Window

START = datetime(2026, 11, 2, tzinfo=UTC)
END = datetime(2026, 11, 3, tzinfo=UTC)

OLD_COLUMNS = ["gpu_hours_allocated", "gpu_hours_active", "gpu_hours_productive", "cost_usd", "usd_per_gpu_hour",
               "usd_per_useful_token", "idle_reserved_usd", "preemption_waste_usd"]
NEW_COLUMNS = ["usd_per_productive_gpu_hour", "useful_tokens", "usd_per_million_tokens",
               "preemption_lost_gpu_hours", "gpu_hours_idle", "cost_without_tokens_usd",
               "share_of_cost_without_tokens", "gpu_hours_borrowed"]
# Last, after every figure (and the job grouping's names): the period each row covers.
PERIOD_COLUMNS = ["period_start", "period_end"]
#: Appended after the period (7 Dec): what each row is, group, idle or total.
KIND_COLUMNS = ["row_kind"]
# Decimal places per column: every non-empty cell of a column has exactly these.
PLACES = {"gpu_hours_allocated": 4, "gpu_hours_active": 4, "gpu_hours_productive": 4, "cost_usd": 2,
          "usd_per_gpu_hour": 4, "usd_per_useful_token": 12, "idle_reserved_usd": 2, "preemption_waste_usd": 2,
          "usd_per_productive_gpu_hour": 4, "useful_tokens": 0, "usd_per_million_tokens": 6,
          "preemption_lost_gpu_hours": 4, "gpu_hours_idle": 4, "cost_without_tokens_usd": 2,
          "share_of_cost_without_tokens": 4, "gpu_hours_borrowed": 4}


def entry(key: str, **figures: object) -> ShowbackEntry:
    return ShowbackEntry(key=key, name=key, properties={"team_id": key}, **figures)  # type: ignore[arg-type]


def fleet_report(group_by: str = "team", with_idle: bool = True) -> Showback:
    """ml: 8 GPU-h allocated, 6 active, 5 productive, $20 (plus a 15th-decimal crumb), 16 GPU-s
    lost ($0.0111), 3,600,000 tokens, $1.006 idle reserved; serve: 1 GPU-h, $20, 160,830,000.6 tokens
    ($1.24354...e-7 a token); vision: 2 GPU-h, $5, no tokens, nothing productive; __idle__:
    1 GPU-h, $2.50. ml and serve are wholly jobs that reported tokens (their cost is token cost)."""
    team = group_by == "team"
    ml = entry("ml", allocated_gpu_seconds=Decimal(28_800), active_gpu_seconds=Decimal(21_600),
               productive_gpu_seconds=Decimal(18_000), lost_gpu_seconds=Decimal(16),
               cost_usd=Decimal("20.000000000000001"), lost_cost_usd=Decimal("0.0111"), useful_tokens=3_600_000.0,
               token_cost_usd=Decimal("20.000000000000001"),
               idle_reserved_usd=Decimal("1.006") if team else None,
               idle_reserved_gpu_seconds=Decimal(1447) if team else None)
    serve = entry("serve", allocated_gpu_seconds=Decimal(3600), active_gpu_seconds=Decimal(3600),
                  productive_gpu_seconds=Decimal(3600), cost_usd=Decimal(20), useful_tokens=160_830_000.6,
                  token_cost_usd=Decimal(20),
                  idle_reserved_usd=Decimal(0) if team else None, idle_reserved_gpu_seconds=Decimal(0) if team else None)
    vision = entry("vision", allocated_gpu_seconds=Decimal(7200), cost_usd=Decimal(5),
                   idle_reserved_usd=Decimal(0) if team else None,
                   idle_reserved_gpu_seconds=Decimal(0) if team else None)
    idle = None
    if with_idle:
        idle = ShowbackEntry(key=showback.IDLE, name=showback.IDLE, properties={},
                             idle_gpu_seconds=Decimal(3600), cost_usd=Decimal("2.5"))
    return Showback(
        window=Window(START, END, "1d"), start=START, end=END, group_by=group_by, entries=[ml, serve, vision],
        idle=idle, capacity_gpu_seconds=Decimal(43_200) if with_idle else None,
        capacity_cost_usd=Decimal("47.5") if with_idle else None, rolled_until=END,
        idle_reserved_gpu_seconds_total=Decimal(1447), idle_reserved_usd_total=Decimal("1.006"),
    )


def read(report: Showback) -> tuple[list[str], dict[str, dict[str, str]]]:
    rows = list(csv.reader(io.StringIO(showback.showback_csv(report))))
    header = rows[0]
    return header, {r[0]: dict(zip(header, r, strict=True)) for r in rows[1:]}


def test_the_existing_columns_come_first_in_their_order_and_the_pages_figures_follow() -> None:
    header, _ = read(fleet_report())
    assert header[0] == "team"
    assert header[1:9] == OLD_COLUMNS
    assert header[9:-3] == NEW_COLUMNS
    assert header[-3:] == PERIOD_COLUMNS + KIND_COLUMNS
    assert list(showback.CSV_COLUMNS) == OLD_COLUMNS + NEW_COLUMNS


def test_every_row_names_the_period_it_covers_so_months_concatenated_stay_apart() -> None:
    """Only the file name said the period: two months' CSVs pasted together lost which rows were
    whose. Every row, __idle__ and TOTAL included, carries the period's ends in UTC, as the
    JSON's `window` says them; by job they follow the job's names."""
    november = fleet_report()
    december_start, december_end = datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC)
    december = fleet_report("job")
    december.window = Window(december_start, december_end, "2026-12")
    december.start, december.end = december_start, december_end
    for report, start, end in ((november, "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z"),
                               (december, "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z")):
        rows = list(csv.reader(io.StringIO(showback.showback_csv(report))))
        header = rows[0]
        assert header[-3:] == PERIOD_COLUMNS + KIND_COLUMNS
        if report.group_by == "job":
            assert header[-6:-3] == list(showback.JOB_CSV_COLUMNS)
        assert [r[0] for r in rows[1:]] == ["ml", "serve", "vision", "__idle__", "TOTAL"]
        assert [r[-1] for r in rows[1:]] == ["group", "group", "group", "idle", "total"]
        for row in rows[1:]:
            assert row[-3:-1] == [start, end], row
        window = showback.showback_json(report)["window"]
        assert [window["start"], window["end"]] == [start, end]


def test_the_new_columns_carry_what_the_page_shows() -> None:
    _, rows = read(fleet_report())
    ml, serve, vision, idle, total = rows["ml"], rows["serve"], rows["vision"], rows["__idle__"], rows["TOTAL"]
    assert ml["usd_per_productive_gpu_hour"] == "4.0000"          # $20 / 5 productive GPU-h
    assert ml["useful_tokens"] == "3600000"
    assert ml["usd_per_million_tokens"] == "5.555556"             # $20 / 3.6M tokens × 1M
    assert ml["preemption_lost_gpu_hours"] == "0.0044"            # 16 GPU-s
    assert ml["preemption_waste_usd"] == "0.01"
    assert serve["useful_tokens"] == "160830001"
    assert serve["usd_per_million_tokens"] == "0.124355"
    assert vision["usd_per_productive_gpu_hour"] == "" and vision["usd_per_million_tokens"] == ""
    assert vision["useful_tokens"] == "0" and vision["preemption_lost_gpu_hours"] == "0.0000"
    assert idle["gpu_hours_idle"] == "1.0000" and idle["cost_usd"] == "2.50"
    assert ml["gpu_hours_idle"] == vision["gpu_hours_idle"] == "0.0000"
    assert total["gpu_hours_idle"] == "1.0000"
    assert total["useful_tokens"] == "164430001"   # the column adds up
    assert total["preemption_lost_gpu_hours"] == "0.0044"
    assert serve["usd_per_productive_gpu_hour"] == "20.0000"
    assert total["usd_per_productive_gpu_hour"] == "7.9167"      # $47.50 (idle included) / 6 productive GPU-h
    # $ per token counts the jobs that reported tokens: ($20 + $20) / 164,430,000.6 tokens; vision's
    # $5 and the idle $2.50 are the cost without tokens beside it
    assert total["usd_per_million_tokens"] == "0.243265"
    assert (vision["cost_without_tokens_usd"], idle["cost_without_tokens_usd"]) == ("5.00", "2.50")
    assert (ml["cost_without_tokens_usd"], ml["share_of_cost_without_tokens"]) == ("0.00", "0.0000")
    assert vision["share_of_cost_without_tokens"] == "1.0000"
    assert total["cost_without_tokens_usd"] == "7.50"
    assert total["share_of_cost_without_tokens"] == "0.1579"     # $7.50 / $47.50


def test_a_token_price_is_fixed_point_never_scientific() -> None:
    for group_by in ("team", "job"):
        header, rows = read(fleet_report(group_by))
        for row in rows.values():
            assert not any(re.search(r"\d[eE][-+]?\d", row[c]) for c in header[1:]), row
    _, rows = read(fleet_report())
    assert rows["serve"]["usd_per_useful_token"] == "0.000000124355"   # $20 / 160,830,000.6 tokens


def test_every_column_has_a_fixed_number_of_places_zero_included() -> None:
    for group_by in ("team", "project"):
        for with_idle in (True, False):
            header, rows = read(fleet_report(group_by, with_idle))
            for name, row in rows.items():
                for column in header[1:]:
                    cell = row[column]
                    if cell == "" or column in PERIOD_COLUMNS + KIND_COLUMNS:
                        continue
                    places = PLACES[column]
                    pattern = r"-?\d+" + (rf"\.\d{{{places}}}" if places else "")
                    assert re.fullmatch(pattern, cell), (group_by, with_idle, name, column, cell)


def test_an_empty_report_writes_zero_with_its_columns_places() -> None:
    report = Showback(window=Window(START, END, "1d"), start=START, end=END, group_by="team", entries=[], idle=None,
                      capacity_gpu_seconds=None, capacity_cost_usd=None, rolled_until=END)
    header, rows = read(report)
    total = rows["TOTAL"]
    assert total["cost_usd"] == "0.00" and total["preemption_waste_usd"] == "0.00"
    assert total["idle_reserved_usd"] == "0.00"
    assert total["gpu_hours_allocated"] == "0.0000" and total["useful_tokens"] == "0"
    assert total["gpu_hours_idle"] == ""   # a reader who sees no fleet figures is not told the fleet's idle


def test_the_total_row_adds_up() -> None:
    for group_by in ("team", "priority_class"):
        header, rows = read(fleet_report(group_by))
        total = rows.pop("TOTAL")
        for column in ("cost_usd", "preemption_waste_usd", "idle_reserved_usd", "useful_tokens", "gpu_hours_idle"):
            if group_by != "team" and column == "idle_reserved_usd":
                # A team's guarantee is no priority class's: no row has it, TOTAL neither (it
                # read 1.01 over rows all empty until 7 Dec).
                assert {r[column] for r in rows.values()} == {""} and total[column] == ""
                continue
            assert sum(Decimal(r[column] or "0") for r in rows.values()) == Decimal(total[column]), column
        assert total["cost_usd"] == "47.50"


def test_the_json_carries_the_same_figures() -> None:
    report = fleet_report()
    body = showback.showback_json(report)
    sets, totals = body["data"][0], body["totals"]
    _, rows = read(report)
    for name in ("ml", "serve", "vision"):
        a, row = sets[name], rows[name]
        assert str(a["usefulTokens"]) == row["useful_tokens"]
        assert a["usdPerMillionTokens"] == (float(row["usd_per_million_tokens"]) if row["usd_per_million_tokens"]
                                            else None)
        assert a["usdPerProductiveGpuHour"] == (float(row["usd_per_productive_gpu_hour"])
                                                if row["usd_per_productive_gpu_hour"] else None)
        assert a["preemptionLostGpuHours"] == float(row["preemption_lost_gpu_hours"])
    assert str(totals["usefulTokens"]) == rows["TOTAL"]["useful_tokens"]
    assert totals["usdPerMillionTokens"] == float(rows["TOTAL"]["usd_per_million_tokens"])
    assert sets["__idle__"]["gpuHours"] == float(rows["__idle__"]["gpu_hours_idle"])
