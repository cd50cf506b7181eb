"""By project, a row is its (team, project) pair, and its key names that pair and no other, even
where a name holds a "/".

The showback keys a project row `team/project` (`language/eval`). The product refuses a "/" in
team and project names (both are slugs: the API, the admin and `full_clean` say so), but the
database does not: a team or project written around the validation (a shell, a data import, SQL)
can hold one, and then team `a/b`'s project `c` and team `a`'s project `b/c` were both keyed
`a/b/c`, as were team `a/b`'s jobs without a project and team `a`'s project `b/__unallocated__`.

Found (7 Dec) on real rollups, the grouping itself (by the team's and project's ids) and each
row's cents were right; but the JSON's `data` (keyed by that name) kept one row of each pair and
dropped the other's cost, so `data` no longer added up to `totals`; `qm showback`, which reads
that JSON, showed one of the two; the CSV's first column, the page's table and the charts' bars
named two rows alike, and the cost-over-time chart added the two into one series. Each part of
the key now writes `%` as `%25` and `/` as `%2F` (as a URL path segment does): `a%2Fb/c` and
`a/b%2Fc`. A name the product accepts has neither, so its key reads as before.
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
from controlplane.services.showback_names import project_key
from frontend.showback_data import cost_series
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.cli.showback_table import table_row

API = "/api/v1/showback/"
#: Each pair's key and what it cost: 2 GPUs at $2.50 per GPU-hour for 3000, 1800, 600 and 1200 s.
EXPECTED = {"a%2Fb/c": Decimal("4.17"), "a/b%2Fc": Decimal("2.50"),
            "a%2Fb/__unallocated__": Decimal("0.83"), "a/b%2F__unallocated__": Decimal("1.67")}


def _pairs_sharing_a_joined_name_ran(fleet: Any) -> str:
    """Teams `a/b` and `a` (written around the validation, as a shell or an import can), each
    with a project, and `a/b`'s jobs without one: four pairs, two joined names."""
    ab, a = (Team.objects.create(name=name, cohort=fleet.ml.cohort) for name in ("a/b", "a"))
    c = Project.objects.create(team=ab, name="c")
    b_c = Project.objects.create(team=a, name="b/c")
    b_unallocated = Project.objects.create(team=a, name="b/__unallocated__")
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    for team, project, node, seconds in ((ab, c, fleet.nodes[0], 3000), (a, b_c, fleet.nodes[1], 1800),
                                         (ab, None, fleet.nodes[2], 600), (a, b_unallocated, fleet.nodes[3], 1200)):
        job = running_job(team, gpus=2, started_at=start, priority_class=fleet.research, project=project)
        hold(job, [(node, 2)], start, start + timedelta(seconds=seconds))
    accounting.catch_up(now)
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{start + timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}"


def _finance() -> Client:
    client = Client()
    client.force_login(User.objects.get(username="finn"))
    return client


def _cents(value: float | str) -> Decimal:
    return Decimal(str(value)).quantize(Decimal("0.01"))


def test_the_product_refuses_a_slash_in_team_and_project_names(fleet: Any) -> None:
    # Where such names cannot come from: only rows written around the validation hold one.
    admin = Client()
    admin.force_login(User.objects.get(username="root"))

    team = admin.post("/api/v1/teams/", {"name": "a/b"}, content_type="application/json")
    project = admin.post("/api/v1/projects/", {"team": "ml", "name": "b/c"}, content_type="application/json")

    assert team.status_code == 400 and "name" in team.json()["errors"], team.content
    assert project.status_code == 400 and "name" in project.json()["errors"], project.content
    assert not Team.objects.filter(name="a/b").exists() and not Project.objects.filter(name="b/c").exists()


def test_a_project_key_escapes_the_slash_and_keeps_slug_names_as_they_were() -> None:
    assert project_key("language", "eval") == "language/eval"
    assert project_key("vision", None) == "vision/__unallocated__"
    assert project_key("a/b", "c") == "a%2Fb/c" != project_key("a", "b/c") == "a/b%2Fc"
    assert project_key("50%", "x") == "50%25/x" != project_key("50%2F", "x") == "50%252F/x"


def test_the_report_has_a_row_per_pair_each_with_its_own_cents(fleet: Any) -> None:
    window = _pairs_sharing_a_joined_name_ran(fleet)
    now = timezone.now()

    report = showback.showback(showback.parse_window(window, now), "project",
                               access_of(User.objects.get(username="finn")), now)

    money = showback.presented_money(report)
    ours = {e.name: money[e.key]["cost_usd"] for e in report.entries if e.properties["team"] in ("a", "a/b")}
    assert ours == EXPECTED, ours
    pairs = {(e.properties["team"], e.properties["project"]) for e in report.entries}
    assert {("a/b", "c"), ("a", "b/c"), ("a/b", "__unallocated__"), ("a", "b/__unallocated__")} <= pairs


def test_the_json_keeps_each_pair_and_adds_up_to_totals(fleet: Any) -> None:
    window = _pairs_sharing_a_joined_name_ran(fleet)

    report = _finance().get(API, {"window": window, "group_by": "project"}).json()

    [data] = report["data"]
    # Every allocation is in `data` once: none is lost under another's key (was $2.50 + $1.67 short).
    added = sum((_cents(a["totalCost"]) for a in data.values()), Decimal(0))
    assert added == _cents(report["totals"]["totalCost"]), sorted(data)
    assert {key: _cents(data[key]["totalCost"]) for key in EXPECTED} == EXPECTED, sorted(data)
    assert all(data[key]["name"] == key for key in EXPECTED)
    assert (data["a%2Fb/c"]["properties"]["team"], data["a%2Fb/c"]["properties"]["project"]) == ("a/b", "c")
    assert (data["a/b%2Fc"]["properties"]["team"], data["a/b%2Fc"]["properties"]["project"]) == ("a", "b/c")
    assert data["a%2Fb/__unallocated__"]["properties"]["project_id"] is None
    assert data["a/b%2F__unallocated__"]["properties"]["project_id"] is not None


def test_the_csv_names_each_pair_once(fleet: Any) -> None:
    window = _pairs_sharing_a_joined_name_ran(fleet)

    response = _finance().get(API, {"window": window, "group_by": "project", "format": "csv"})

    rows = [r for r in csv.DictReader(io.StringIO(response.content.decode())) if r["row_kind"] == "group"]
    firsts = [r["project"] for r in rows]
    assert len(firsts) == len(set(firsts)), firsts
    assert {r["project"]: Decimal(r["cost_usd"]) for r in rows} == EXPECTED
    assert {r["project"]: (r["team"], r["project_name"]) for r in rows} == {
        "a%2Fb/c": ("a/b", "c"), "a/b%2Fc": ("a", "b/c"),
        "a%2Fb/__unallocated__": ("a/b", ""), "a/b%2F__unallocated__": ("a", "b/__unallocated__")}


def test_the_page_and_its_cost_chart_keep_each_pair_apart(fleet: Any) -> None:
    window = _pairs_sharing_a_joined_name_ran(fleet)
    now = timezone.now()
    finance = access_of(User.objects.get(username="finn"))
    report = showback.showback(showback.parse_window(window, now), "project", finance, now)

    series, _ = cost_series(report, "project", finance, now)
    html = _finance().get("/showback/", {"window": window, "group_by": "project"}).content.decode()

    # The chart added a/b's project c and a's project b/c into one series of $6.67.
    totals = {name: _cents(round(sum(cost for _, cost in bars), 2)) for name, bars in series.items()}
    assert totals == EXPECTED, totals
    table = html[html.index('id="showback-table"'):html.index("</table>", html.index('id="showback-table"'))]
    named = {re.sub(r"<[^>]+>", "", name).strip(): re.findall(r"<td>(.*?)</td>", rest, re.S)[3].strip()
             for kind, name, rest in re.findall(r'<tr class="([^"]*)">\s*<th scope="row">(.*?)</th>(.*?)</tr>',
                                                table, re.S) if kind == ""}
    assert named == {"a%2Fb/c": "$4.17", "a/b%2Fc": "$2.50", "a%2Fb (no project)": "$0.83",
                     "a/b%2F__unallocated__": "$1.67"}, named


def test_qm_showback_shows_each_pair(qm: Any, fleet: Any) -> None:
    window = _pairs_sharing_a_joined_name_ran(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "project", "--window", window)

    assert r.code == 0, r.err
    assert {key: Decimal(table_row(r.out, key)["COST $"]) for key in EXPECTED} == EXPECTED, r.out
