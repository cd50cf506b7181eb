"""The cents of one window are the same whatever the grouping (finance audit, 5 Dec).

Money was apportioned to the cent over the groups and `__idle__` together (largest remainder), so
the cent a rounding hands out went to whichever row had the largest remainder in that grouping:
on the demo the teams of one window cost $11.51 and its priority classes $11.50 (`__idle__`
$9.70 and $9.71), and a team's projects could add up to a cent less than the team's row in the
team report. Now the groups add up to Σ groups rounded once (`__idle__` takes the rest of
TOTAL), and by project or job each team's rows add up to that team's cents in the team report.
"""

from __future__ import annotations

import csv
import io
import random
from datetime import UTC, datetime
from decimal import Decimal

from controlplane.services.showback import (
    IDLE,
    Showback,
    ShowbackEntry,
    Window,
    presented_money,
    showback_csv,
    showback_json,
)

START, END = datetime(2026, 11, 30, 23, 0, tzinfo=UTC), datetime(2026, 12, 1, 1, 0, tzinfo=UTC)


def _report(group_by: str, rows: list[tuple[str, dict, str]], idle: str | None = "0") -> Showback:
    entries = [ShowbackEntry(key=key, name=key, properties=props, cost_usd=Decimal(cost), lost_cost_usd=Decimal(cost) / 7)
               for key, props, cost in rows]
    entries.sort(key=lambda e: (-e.cost_usd, e.name))
    idle_entry = None
    if idle is not None:
        idle_entry = ShowbackEntry(key=IDLE, name=IDLE, properties={}, cost_usd=Decimal(idle))
    return Showback(window=Window(START, END, "2026-11-30T23:00:00Z,2026-12-01T01:00:00Z"), start=START, end=END,
                    group_by=group_by, entries=entries, idle=idle_entry, capacity_gpu_seconds=Decimal(0),
                    capacity_cost_usd=None, rolled_until=END)


def _team_of(group_by: str, key: str) -> str:
    return key.split("/")[0] if group_by == "project" else key.split("-")[0]


def _reports(projects: dict[str, str], idle: str | None) -> dict[str, Showback]:
    """One window's exact figures in every grouping: `projects` maps 'team/project' to its cost,
    each project has one job ('team-project'), and each team is its own priority class."""
    teams: dict[str, Decimal] = {}
    for name, cost in projects.items():
        teams[name.split("/")[0]] = teams.get(name.split("/")[0], Decimal(0)) + Decimal(cost)
    return {
        "team": _report("team", [(t, {"team": t}, str(c)) for t, c in teams.items()], idle),
        "priority_class": _report("priority_class", [(f"class-{t}", {}, str(c)) for t, c in teams.items()], idle),
        "project": _report("project", [(p, {"team": p.split("/")[0]}, c) for p, c in projects.items()], idle),
        "job": _report("job", [(p.replace("/", "-"), {"team": p.split("/")[0]}, c) for p, c in projects.items()], idle),
    }


def test_a_teams_projects_add_up_to_the_teams_cents():
    # The team's $0.006 rounds to a cent; alone, __idle__'s $0.005 had the largest remainder of
    # the project report and took it: the projects said $0.00 where the team said $0.01.
    reports = _reports({"vision/detector": "0.003", "vision/segmentation": "0.003"}, idle="0.005")
    team = presented_money(reports["team"])
    project = presented_money(reports["project"])

    assert team["vision"]["cost_usd"] == Decimal("0.01")
    assert project["vision/detector"]["cost_usd"] + project["vision/segmentation"]["cost_usd"] == Decimal("0.01")
    assert team[IDLE]["cost_usd"] == project[IDLE]["cost_usd"] == Decimal("0.00")
    assert team["TOTAL"]["cost_usd"] == project["TOTAL"]["cost_usd"] == Decimal("0.01")


def test_idle_and_the_groups_cost_the_same_in_every_grouping():
    reports = _reports({"language/eval": "0.003", "vision/detector": "0.003"}, idle="0.005")
    money = {g: presented_money(r) for g, r in reports.items()}

    for grouping, cents in money.items():
        groups = sum((c["cost_usd"] for k, c in cents.items() if k not in ("TOTAL", IDLE)), Decimal(0))
        assert (groups, cents[IDLE]["cost_usd"], cents["TOTAL"]["cost_usd"]) == \
            (Decimal("0.01"), Decimal("0.00"), Decimal("0.01")), grouping


def test_many_random_windows_reconcile_in_the_csv_and_the_json():
    rng = random.Random(20261205)
    for _ in range(200):
        projects = {f"{t}/{p}": str(Decimal(rng.randrange(0, 100_000)) / 10_000)
                    for t in ("language", "vision", "serving") for p in ("a", "b", "c") if rng.random() < 0.7}
        if not projects:
            continue
        idle = rng.choice([None, str(Decimal(rng.randrange(0, 100_000)) / 10_000)])
        reports = _reports(projects, idle)
        team_csv = {row["team"]: row for row in csv.DictReader(io.StringIO(showback_csv(reports["team"])))}
        for grouping in ("project", "job"):
            rows = list(csv.DictReader(io.StringIO(showback_csv(reports[grouping]))))
            for column in ("cost_usd", "preemption_waste_usd", "cost_without_tokens_usd"):
                by_team: dict[str, Decimal] = {}
                for row in rows:
                    if row[grouping] not in ("TOTAL", IDLE):
                        team = _team_of(grouping, row[grouping])
                        by_team[team] = by_team.get(team, Decimal(0)) + Decimal(row[column])
                assert by_team == {t: Decimal(r[column]) for t, r in team_csv.items() if t not in ("TOTAL", IDLE)}, \
                    (grouping, column, projects, idle)
                for key in ("TOTAL", IDLE):
                    assert [r[column] for r in rows if r[grouping] == key] == \
                        [r[column] for k, r in team_csv.items() if k == key], (grouping, column, key)
        for grouping in ("priority_class", "project", "job"):
            body = showback_json(reports[grouping])
            allocations = body["data"][0]
            groups = sum(Decimal(str(a["totalCost"])) for k, a in allocations.items() if k != IDLE)
            assert groups + Decimal(str(allocations.get(IDLE, {}).get("totalCost", 0))) == \
                Decimal(str(body["totals"]["totalCost"]))
            if idle is not None:
                assert allocations[IDLE]["totalCost"] == showback_json(reports["team"])["data"][0][IDLE]["totalCost"]


def test_idle_costs_without_tokens_exactly_what_it_costs():
    """Nothing __idle__ cost reported tokens, so its two cells are one figure: rounded as columns
    of their own they read $15.85 without tokens beside a cost of $15.86 on the demo."""
    rng = random.Random(5)
    for _ in range(200):
        projects = {f"{t}/a": str(Decimal(rng.randrange(0, 100_000)) / 10_000) for t in ("language", "vision")}
        reports = _reports(projects, idle=str(Decimal(rng.randrange(0, 100_000)) / 10_000))
        for grouping, report in reports.items():
            for entry in report.entries:  # half the groups' cost reported tokens
                entry.token_cost_usd = entry.cost_usd / 2
            cents = presented_money(report)
            assert cents[IDLE]["cost_without_tokens_usd"] == cents[IDLE]["cost_usd"], (grouping, projects)
            assert cents["TOTAL"]["cost_without_tokens_usd"] == sum(
                (c["cost_without_tokens_usd"] for k, c in cents.items() if k != "TOTAL"), Decimal(0))


def test_a_teams_projects_add_up_to_the_teams_useful_tokens():
    """Whole tokens were apportioned over all rows at once: vision's 0.8 tokens rounded to 1 in
    the team report, while its two projects of 0.4 lost the token to language's one project of
    0.6 in the project report (vision's projects said 0, the team 1)."""
    from controlplane.services.showback import presented_tokens

    tokens = {"vision/a": 0.4, "vision/b": 0.4, "language/a": 0.6}
    reports = _reports({"vision/a": "2", "vision/b": "2", "language/a": "3"}, idle="1")
    for report in reports.values():
        for entry in report.entries:
            if report.group_by == "team":
                entry.useful_tokens = sum(v for k, v in tokens.items() if k.startswith(entry.key + "/"))
            elif report.group_by in ("project", "job"):
                entry.useful_tokens = tokens[entry.key.replace("-", "/", 1)]
    team = presented_tokens(reports["team"])
    for grouping in ("project", "job"):
        shown = presented_tokens(reports[grouping])
        by_team = {t: sum(n for k, n in shown.items() if k not in ("TOTAL", IDLE) and _team_of(grouping, k) == t)
                   for t in ("vision", "language")}
        assert by_team == {"vision": team["vision"], "language": team["language"]}, (grouping, shown, team)
        assert shown["TOTAL"] == team["TOTAL"] == 1
        assert shown[IDLE] == 0
