"""Finance review, 7 Dec: idle reserved quota is a team's (its guarantee, neither used nor lent),
not a project's or a priority class's. By project, the page hid it while the CSV's TOTAL row and
`qm showback`'s TOTAL carried it (the CSV's column then no longer added up: every group's cell
empty, TOTAL's $1.23). Now the page, the CSV, the JSON and `qm` agree: by team each shows the
same figure per team and in TOTAL; in any other grouping none shows it, and the page and `qm`
say where it is (group by team). The shared fleet guarantees ml and vision 16 H100 each, so
guarantees sit idle while ml's one job runs."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from tests.controlplane.cli.showback_table import ml_job_ran, table_columns, table_row

WINDOW = "24h"


def the_four(qm, group_by: str) -> tuple[dict, dict, dict, str]:
    """The page's context, the CSV (rows by name), the API's JSON and `qm`'s table, for finn."""
    page = Client()
    assert page.login(username="finn", password="finn")
    response = page.get(f"/showback/?window={WINDOW}&group_by={group_by}")
    assert response.status_code == 200
    csv_text = qm("showback", "--by", group_by, "--window", WINDOW, "--csv")
    assert csv_text.code == 0, csv_text.err
    rows = list(csv.reader(io.StringIO(csv_text.out)))
    by_name = {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    api = qm("showback", "--by", group_by, "--window", WINDOW, "--json")
    assert api.code == 0, api.err
    table = qm("showback", "--by", group_by, "--window", WINDOW)
    assert table.code == 0, table.err
    return response, by_name, api.json(), table.out


@pytest.fixture
def ml_ran(fleet):
    now = timezone.now().replace(microsecond=0)
    ml_job_ran(fleet, gpus=8, start=now - timedelta(hours=2), held=timedelta(hours=1), tokens_per_s=100.0,
               rolled_up_to=now)
    return fleet


def test_by_team_the_page_csv_api_and_qm_show_the_same_idle_reserved_quota(qm, ml_ran) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    response, csv_rows, body, table = the_four(qm, "team")
    html = response.content.decode()
    assert ">Idle reserved quota</th>" in html
    page = {r["name"]: r for r in response.context["rows"]}
    sets = body["data"][0]
    total = Decimal(csv_rows["TOTAL"]["idle_reserved_usd"])
    assert total > 0   # ml's guarantee sat half idle, vision's wholly
    for name in ("ml", "vision", "TOTAL"):
        figure = Decimal(csv_rows[name]["idle_reserved_usd"])
        assert page[name]["idle_reserved_usd"] == figure, name
        cost = body["totals"]["idleReservedCost"] if name == "TOTAL" else sets[name]["idleReservedCost"]
        assert Decimal(str(cost)).quantize(Decimal("0.01")) == figure, name
        assert table_row(table, name)["IDLE RESERVED $"] == f"{figure:,.2f}", name
    assert sum(Decimal(csv_rows[n]["idle_reserved_usd"]) for n in ("ml", "vision")) == total


@pytest.mark.parametrize("group_by", ["project", "priority_class"])
def test_outside_the_team_grouping_none_of_the_four_shows_idle_reserved_quota_and_page_and_qm_say_why(
        qm, ml_ran, group_by: str) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    response, csv_rows, body, table = the_four(qm, group_by)
    html = response.content.decode()
    # The page: no column, no figure; a note naming where the figure is.
    assert "Idle reserved quota</th>" not in html
    assert all(r["idle_reserved_usd"] is None for r in response.context["rows"])
    note = re.search(r'<p class="note" id="idle-reserved-by-team">(.*?)</p>', html, re.S)
    assert note and "group by team" in note.group(1), html
    # The CSV keeps the column where consumers read it by position, empty on every row, TOTAL too,
    # so the column still adds up.
    header = next(csv.reader(io.StringIO(qm("showback", "--by", group_by, "--window", WINDOW, "--csv").out)))
    assert header[7] == "idle_reserved_usd"
    assert {name: row["idle_reserved_usd"] for name, row in csv_rows.items()} == dict.fromkeys(csv_rows, "")
    assert "TOTAL" in csv_rows and len(csv_rows) >= 3
    # The JSON: null on every allocation and in the totals.
    assert body["totals"]["idleReservedCost"] is None
    assert all(a.get("idleReservedCost") is None for a in body["data"][0].values())
    # qm: no IDLE RESERVED $ column (it read "-" on every group and a figure on TOTAL), and a line.
    assert "IDLE RESERVED $" not in table_columns(table), table
    assert any(line.startswith("Idle reserved quota is per team") and "--by team" in line
               for line in table.splitlines()), table
    # And the other columns still agree with the page: TOTAL's cost is the same everywhere.
    page_total = next(r for r in response.context["rows"] if r["is_total"])
    assert page_total["cost_usd"] == Decimal(csv_rows["TOTAL"]["cost_usd"])
    assert table_row(table, "TOTAL")["COST $"] == f"{page_total['cost_usd']:,.2f}"
