"""A row's cost without tokens is part of its cost, to the cent (finance audit, 5 Dec).

Cost and cost without tokens were two columns apportioned to the cent apart: on the demo,
`qm showback --by job` showed a training job that reported no tokens at COST $ 13.37 and COST
W/O TOKENS $ 13.36 (its share without tokens 100 %), and a job could read more without tokens than
its cost. Now every row's cost (its cents as before) is its token-reporting cents plus the rest:
a row without tokens costs without tokens exactly its cost, a row whose cost all reported tokens
$0.00, no row more than its cost; the columns add up to TOTAL, and a team's rows to its cost in
the team report (and to its cost without tokens wherever a row of both kinds can take the cents).
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

START, END = datetime(2026, 12, 4, 23, 0, tzinfo=UTC), datetime(2026, 12, 5, 1, 0, tzinfo=UTC)


def _report(group_by: str, rows: list[tuple[str, dict, Decimal, Decimal]], idle: Decimal | None) -> Showback:
    """rows: (key, properties, cost, of which the cost of jobs that reported tokens)."""
    entries = [ShowbackEntry(key=key, name=key, properties=props, cost_usd=cost, token_cost_usd=tokens)
               for key, props, cost, tokens in rows]
    entries.sort(key=lambda e: (-e.cost_usd, e.name))
    idle_entry = None if idle is None else ShowbackEntry(key=IDLE, name=IDLE, properties={}, cost_usd=idle)
    return Showback(window=Window(START, END, "2026-12-04T23:00:00Z,2026-12-05T01:00:00Z"), start=START, end=END,
                    group_by=group_by, entries=entries, idle=idle_entry, capacity_gpu_seconds=Decimal(0),
                    capacity_cost_usd=None, rolled_until=END)


def _reports(jobs: dict[str, tuple[Decimal, bool]], idle: Decimal | None) -> dict[str, Showback]:
    """One window in every grouping: `jobs` maps 'team/project/job' to its cost and whether it
    reported tokens (a job either did or did not); each team is its own priority class."""
    groups: dict[str, dict[str, list[Decimal]]] = {"team": {}, "project": {}, "job": {}}
    for name, (cost, tokens) in jobs.items():
        team, project, _ = name.split("/")
        for grouping, key in (("team", team), ("project", f"{team}/{project}"), ("job", name)):
            into = groups[grouping].setdefault(key, [Decimal(0), Decimal(0)])
            into[0] += cost
            into[1] += cost if tokens else Decimal(0)

    def rows(grouping: str, key_of=lambda k: k) -> list[tuple[str, dict, Decimal, Decimal]]:
        return [(key_of(k), {"team": k.split("/")[0]}, c, t) for k, (c, t) in groups[grouping].items()]

    return {
        "team": _report("team", rows("team"), idle),
        "priority_class": _report("priority_class", [(f"class-{k}", {}, c, t) for k, _, c, t in rows("team")], idle),
        "project": _report("project", rows("project"), idle),
        "job": _report("job", rows("job"), idle),
    }


def test_a_job_without_tokens_costs_without_tokens_exactly_its_cost():
    # The team's $0.012 is $0.01; its cent went to the job with tokens (the earlier of two equal
    # costs), while the team's cost without tokens ($0.006, a cent) went to the other job: it read
    # a cost of $0.00 and $0.01 without tokens.
    reports = _reports({"language/llm/a-serve": (Decimal("0.006"), True),
                        "language/llm/b-train": (Decimal("0.006"), False)}, idle=Decimal("0.5"))
    by_job = presented_money(reports["job"])
    by_team = presented_money(reports["team"])

    for key in ("language/llm/a-serve", "language/llm/b-train"):
        assert by_job[key]["cost_without_tokens_usd"] <= by_job[key]["cost_usd"], (key, by_job[key])
    assert by_job["language/llm/b-train"]["cost_without_tokens_usd"] == by_job["language/llm/b-train"]["cost_usd"]
    assert by_job["language/llm/a-serve"]["cost_without_tokens_usd"] == Decimal("0.00")
    for column in ("cost_usd", "cost_without_tokens_usd"):
        assert sum(by_job[k][column] for k in ("language/llm/a-serve", "language/llm/b-train")) == \
            by_team["language"][column], column
        assert by_job["TOTAL"][column] == by_team["TOTAL"][column], column


def _check(reports: dict[str, Showback], jobs: dict[str, tuple[Decimal, bool]]) -> None:
    money = {grouping: presented_money(report) for grouping, report in reports.items()}
    for grouping, report in reports.items():
        cents = money[grouping]
        for entry in report.entries:
            cost, without = cents[entry.key]["cost_usd"], cents[entry.key]["cost_without_tokens_usd"]
            assert Decimal(0) <= without <= cost, (grouping, entry.key, cost, without, jobs)
            if not entry.token_cost_usd:
                assert without == cost, (grouping, entry.key, jobs)
            if entry.token_cost_usd == entry.cost_usd:
                assert without == 0, (grouping, entry.key, jobs)
            assert abs(cost - entry.cost_usd) < Decimal("0.01"), (grouping, entry.key, cost, entry.cost_usd)
        for column in ("cost_usd", "cost_without_tokens_usd"):
            assert cents["TOTAL"][column] == sum((c[column] for k, c in cents.items() if k != "TOTAL"), Decimal(0))
        assert cents["TOTAL"]["cost_usd"] == money["team"]["TOTAL"]["cost_usd"], (grouping, jobs)
        if IDLE in cents:
            assert cents[IDLE] == money["team"][IDLE]
            assert cents[IDLE]["cost_without_tokens_usd"] == cents[IDLE]["cost_usd"]
        if grouping in ("project", "job"):
            for column in ("cost_usd", "cost_without_tokens_usd"):
                by_team: dict[str, Decimal] = {}
                for entry in report.entries:
                    team = entry.properties["team"]
                    by_team[team] = by_team.get(team, Decimal(0)) + cents[entry.key][column]
                team_report = {e.key: money["team"][e.key][column] for e in reports["team"].entries}
                assert by_team.keys() == team_report.keys()
                absorbing = _absorbing_teams(report, cents)
                for team, value in by_team.items():
                    if column == "cost_usd" or team in absorbing:
                        assert value == team_report[team], (grouping, column, team, jobs)
                    else:
                        # Every row all or nothing (by job, always): the team's cents without
                        # tokens are those its cost's apportionment put on its rows without tokens.
                        rows = [e for e in report.entries if e.properties["team"] == team]
                        assert abs(value - team_report[team]) <= Decimal("0.01") * len(rows), (team, jobs)


def _absorbing_teams(report: Showback, cents: dict[str, dict[str, Decimal]]) -> set[str]:
    """The teams with a row of both kinds of work whose cents can take the rest of the team's
    token-reporting cents (a cent either way of its own share)."""
    teams = set()
    for entry in report.entries:
        mixed = bool(entry.token_cost_usd) and entry.token_cost_usd != entry.cost_usd
        if mixed and Decimal("0.02") <= entry.token_cost_usd <= cents[entry.key]["cost_usd"] - Decimal("0.02"):
            teams.add(entry.properties["team"])
    return teams


def test_many_random_windows_keep_each_rows_cost_without_tokens_within_its_cost():
    rng = random.Random(20261205)
    for _ in range(400):
        jobs = {f"{team}/{project}/{job}": (Decimal(rng.randrange(1, rng.choice([3_000, 3_000_000]))) / 100_000,
                                                   rng.random() < 0.5)
                for team in ("language", "vision", "serving") for project in ("a", "b")
                for job in ("j1", "j2", "j3") if rng.random() < 0.5}
        if not jobs:
            continue
        idle = rng.choice([None, Decimal(rng.randrange(0, 100_000)) / 10_000])
        _check(_reports(jobs, idle), jobs)


def test_the_csv_and_the_json_say_the_same_cents():
    reports = _reports({"language/llm/a-serve": (Decimal("0.006"), True),
                        "language/llm/b-train": (Decimal("0.006"), False),
                        "vision/det/c-train": (Decimal("13.3651"), False)}, idle=Decimal("2"))
    rows = {r["job"]: r for r in csv.DictReader(io.StringIO(showback_csv(reports["job"])))}
    allocations = showback_json(reports["job"])["data"][0]
    for key, row in rows.items():
        assert Decimal(row["cost_without_tokens_usd"]) <= Decimal(row["cost_usd"]), row
        if key not in ("TOTAL",):
            assert Decimal(str(allocations[key]["costWithoutTokens"])) == Decimal(row["cost_without_tokens_usd"])
            assert Decimal(str(allocations[key]["totalCost"])) == Decimal(row["cost_usd"])
    assert rows["vision/det/c-train"]["cost_without_tokens_usd"] == rows["vision/det/c-train"]["cost_usd"] == "13.37"
