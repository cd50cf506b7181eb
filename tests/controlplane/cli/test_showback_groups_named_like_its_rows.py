"""A team named `TOTAL` or `__idle__`, or a project named `__unallocated__`, stored before names
like these were refused (7 Dec: a shell, a data import, a fleet older than the rule), is an
ordinary group in every view of the showback, and the report's own total, idle capacity and
no-project rows stay what they are.

Found (7 Dec) with the rule bypassed as such a fleet has it, on real rollups: the JSON's `data`
(keyed by name) lost the team `__idle__` under the idle capacity, so its rows no longer added up
to `totals` and `qm showback`, which reads that JSON, showed no such team at all; the CSV had two
`TOTAL` rows (and two `__idle__` ones) that only their place told apart; by project the real
project `__unallocated__` took the place of its team's jobs without a project in the JSON and
read "(no project)" on the page and `""` as its project in the CSV. The report's rows are now
told apart by what they are, not by their names: the JSON's allocations and `totals` carry
`kind` (`group`, `idle`, `total`), a group whose name is the idle or no-project row's key is
keyed by its name and id, and the CSV's rows carry `row_kind`.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from controlplane.models import Project, Team
from controlplane.services import accounting, showback
from controlplane.services.access import access_of
from frontend import figures
from frontend.showback_data import cost_series, report_rows
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.cli.showback_table import table_row

API = "/api/v1/showback/"


def _groups_named_like_rows_ran(fleet: Any) -> tuple[str, dict[str, Team]]:
    """Teams TOTAL and __idle__ (made as a fleet from before the rule has them, no check run)
    and ml's project __unallocated__ each held GPUs; ml also ran a job in no project."""
    teams = {name: Team.objects.create(name=name, cohort=fleet.ml.cohort) for name in ("TOTAL", "__idle__")}
    impostor = Project.objects.create(team=fleet.ml, name="__unallocated__")
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    for team, project, node, seconds in ((teams["TOTAL"], None, fleet.nodes[1], 3000),
                                         (teams["__idle__"], None, fleet.nodes[2], 1800),
                                         (fleet.ml, impostor, fleet.nodes[3], 1200),
                                         (fleet.ml, None, fleet.nodes[3], 600)):
        job = running_job(team, gpus=2, started_at=start, priority_class=fleet.research, project=project)
        hold(job, [(node, 2)], start, start + timedelta(seconds=seconds), first_index=0 if seconds != 600 else 2)
    accounting.catch_up(now)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{start + timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}", teams


def _finance() -> Client:
    client = Client()
    client.force_login(User.objects.get(username="finn"))
    return client


def _cents(value: float | str) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.01"))


def test_the_json_keeps_a_team_named_like_the_idle_row_and_marks_each_entrys_kind(fleet: Any) -> None:
    window, teams = _groups_named_like_rows_ran(fleet)

    report = _finance().get(API, {"window": window, "group_by": "team"}).json()

    [data] = report["data"]
    # Every entry of `data` is counted once in `totals`: the team __idle__ is not lost under the
    # idle capacity (it was: $2.50 short).
    added = sum((_cents(a["totalCost"]) for a in data.values()), Decimal(0))
    assert added == _cents(report["totals"]["totalCost"]), data.keys()
    # 2 GPUs for 1800 s at $2.50/GPU-hour: $2.50; for 3000 s: $4.17.
    by_team = {a["properties"]["team"]: a for a in data.values() if a["properties"].get("team")}
    assert _cents(by_team["__idle__"]["totalCost"]) == Decimal("2.50"), data.keys()
    assert _cents(by_team["TOTAL"]["totalCost"]) == Decimal("4.17")
    groups = {key: a for key, a in data.items() if a["kind"] == "group"}
    assert by_team["__idle__"]["name"] == "__idle__"
    assert by_team["__idle__"]["properties"]["team_id"] == teams["__idle__"].pk
    # The idle capacity keeps its documented key; the team of that name is keyed by name and id.
    assert data["__idle__"]["kind"] == "idle"
    assert f"__idle__ (team {teams['__idle__'].pk})" in groups
    assert data["TOTAL"]["kind"] == "group"  # the team: the total is `totals`
    assert report["totals"]["kind"] == "total"


def test_the_csv_marks_each_rows_kind_and_has_one_total(fleet: Any) -> None:
    window, _ = _groups_named_like_rows_ran(fleet)

    response = _finance().get(API, {"window": window, "group_by": "team", "format": "csv"})

    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    kinds = [(r["team"], r["row_kind"]) for r in rows]
    assert [k for _, k in kinds].count("total") == 1 and kinds[-1] == ("TOTAL", "total"), kinds
    assert [k for _, k in kinds].count("idle") == 1 and kinds[-2] == ("__idle__", "idle"), kinds
    assert ("TOTAL", "group") in kinds and ("__idle__", "group") in kinds
    team_total = next(r for r in rows if r["team"] == "TOTAL" and r["row_kind"] == "group")
    assert team_total["cost_usd"] == "4.17"
    added = sum((Decimal(r["cost_usd"]) for r in rows if r["row_kind"] != "total"), Decimal(0))
    assert added == Decimal(rows[-1]["cost_usd"])


def test_the_page_shows_teams_named_like_its_rows_as_teams(fleet: Any) -> None:
    # Already so before 7 Dec (the page told its rows by their keys, team ids): kept so.
    window, _ = _groups_named_like_rows_ran(fleet)

    html = _finance().get("/showback/", {"window": window}).content.decode()

    table = html[html.index('id="showback-table"'):html.index("</table>", html.index('id="showback-table"'))]
    rows = [(kind, re.sub(r"<[^>]+>", "", name).strip(), re.findall(r"<td>(.*?)</td>", rest, re.S))
            for kind, name, rest in re.findall(r'<tr class="([^"]*)">\s*<th scope="row">(.*?)</th>(.*?)</tr>',
                                               table, re.S)]
    costs = {(kind, name): cells[3].strip() for kind, name, cells in rows}
    assert costs[("", "TOTAL")] == "$4.17", costs
    assert costs[("", "__idle__")] == "$2.50", costs
    assert [kind for kind, _, _ in rows].count("total") == 1 and rows[-1][0] == "total"


def test_the_project_named_like_the_no_project_row_is_a_project(fleet: Any) -> None:
    window, _ = _groups_named_like_rows_ran(fleet)
    finance = _finance()

    [data] = finance.get(API, {"window": window, "group_by": "project"}).json()["data"]
    csv_rows = list(csv.DictReader(io.StringIO(finance.get(
        API, {"window": window, "group_by": "project", "format": "csv"}).content.decode())))
    html = finance.get("/showback/", {"window": window, "group_by": "project"}).content.decode()

    # ml's jobs without a project keep the documented key; the project of that name is beside it.
    assert data["ml/__unallocated__"]["properties"]["project_id"] is None
    assert _cents(data["ml/__unallocated__"]["totalCost"]) == Decimal("0.83")
    [real] = [a for a in data.values() if a["properties"].get("project") == "__unallocated__"
              and a["properties"]["project_id"] is not None]
    assert real["kind"] == "group"
    assert _cents(real["totalCost"]) == Decimal("1.67")
    ml = {r["project_name"]: r["cost_usd"] for r in csv_rows if r["team"] == "ml"}
    assert ml == {"": "0.83", "__unallocated__": "1.67"}
    assert html.count("ml (no project)") >= 1
    assert re.search(r'<th scope="row">ml/__unallocated__</th>', html), "the project reads as (no project)"


def test_qm_showback_shows_the_teams_and_says_which_row_is_the_total(qm: Any, fleet: Any) -> None:
    window, teams = _groups_named_like_rows_ran(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--window", window)

    assert r.code == 0, r.err
    assert table_row(r.out, f"__idle__ (team {teams['__idle__'].pk})")["COST $"] == "2.50", r.out
    table = [re.split(r"\s{2,}", line.strip()) for line in r.out.splitlines()[2:] if re.match(r"\S.*\s{2,}\S", line)]
    names = [cells[0] for cells in table]
    assert names.count("TOTAL") == 2 and names[-1] == "TOTAL" and names[-2] == "__idle__", r.out
    columns = re.split(r"\s{2,}", r.out.splitlines()[1].strip())
    # the team, above the idle capacity and the total
    assert table[names.index("TOTAL")][columns.index("COST $")] == "4.17", r.out
    assert "team named TOTAL" in r.out and "the last row is the report's total" in r.out, r.out
    idle_line = next(line for line in r.out.splitlines() if line.startswith("__idle__:"))
    assert "capacity no job held" in idle_line


def test_a_member_of_a_team_named_total_sees_two_bars_for_two_rows(fleet: Any) -> None:
    """The price-per-GPU-hour chart named the total `TOTAL` for members: with their team named so
    too, Plotly's category axis put both bars in one place."""
    _, teams = _groups_named_like_rows_ran(fleet)
    member = f.make_user("tina", team=teams["TOTAL"])
    now = timezone.now()

    report = showback.showback(showback.parse_window("24h", now), "team", access_of(member), now)
    rows = [{**r, "name": r["shown"]} for r in report_rows(report)]
    chart = figures.unit_costs(rows, "team")

    categories = chart.figure["data"][0]["x"]
    assert len(categories) == 2 and len(set(categories)) == 2, categories


def test_the_cost_chart_keeps_the_project_apart_from_the_jobs_without_one(fleet: Any) -> None:
    """The cost-over-time chart grouped by project names: ml's project `__unallocated__` and ml's
    jobs without a project were one series of $2.50 (until 7 Dec)."""
    window, _ = _groups_named_like_rows_ran(fleet)
    now = timezone.now()
    finance = access_of(User.objects.get(username="finn"))
    report = showback.showback(showback.parse_window(window, now), "project", finance, now)

    series, _ = cost_series(report, "project", finance, now)

    totals = {name: float(sum(cost for _, cost in bars)) for name, bars in series.items() if name.startswith("ml/")}
    project = Project.objects.get(team=fleet.ml, name="__unallocated__")
    assert totals == {"ml/__unallocated__": 0.83, f"ml/__unallocated__ (project {project.pk})": 1.67}, totals
