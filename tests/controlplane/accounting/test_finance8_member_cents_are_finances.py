"""A team's member reads the cents finance charges the team (finance walk, 7 Dec).

The cents are apportioned (largest remainder) so every column adds up to its TOTAL. A member's
report held only their own teams, so their team's cents were apportioned alone, and rounded on
their own: three teams each costing $0.006 cost $0.02 together, which finance's report shares out
as $0.01, $0.01 and $0.00, while the team given $0.00 read $0.01 on its own showback. What a team
is charged (finance's CSV) and what the team sees (its page, its CSV, `qm showback`) now agree
to the cent: a member's rows are apportioned beside the teams they do not read, which are then
left out (the figures of those teams are never shown).

Three teams (audio, ml, vision) each hold one H100 for 8.64 s at $2.50/GPU-h: $0.006 each.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.services import accounting
from controlplane.services.accounting import MINUTE, floor_to
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

MONEY = ("totalCost", "costWithoutTokens", "preemptionWasteCost", "idleReservedCost", "usefulTokens")


@pytest.fixture
def window(fleet: Fleet) -> str:
    """Three teams at $0.006 each, rolled up; the window (start,end) that covers them."""
    rolled = floor_to(timezone.now(), MINUTE) - timedelta(minutes=5)
    start = rolled - timedelta(minutes=30)
    audio = f.make_team("audio")
    f.make_quota(audio, fleet.h100, 4)
    for i, team in enumerate((audio, fleet.ml, fleet.vision)):
        job = running_job(team, gpus=1, started_at=start, project=fleet.llm if team == fleet.ml else None)
        hold(job, [(fleet.nodes[1 + i], 1)], start, start + timedelta(seconds=8.64))
    accounting.catch_up(rolled + timedelta(seconds=50))
    return f"{start:%Y-%m-%dT%H:%M:%SZ},{rolled:%Y-%m-%dT%H:%M:%SZ}"


def _rows(client, window: str, group_by: str) -> dict:
    r = client.get("/api/v1/showback/", {"window": window, "group_by": group_by})
    assert r.status_code == 200, r.json()
    return r.json()["data"][0]


def test_a_member_reads_the_cents_finance_charges_their_team(clients, window) -> None:
    finance = _rows(clients["finance"], window, "team")
    # Finance's report shares the $0.018 out as $0.02: a cent to each of the first two teams.
    assert [finance[t]["totalCost"] for t in ("audio", "ml", "vision")] == [0.01, 0.01, 0.0]

    for role, team in (("owner", "ml"), ("other_team", "vision")):
        mine = _rows(clients[role], window, "team")
        assert list(mine) == [team]
        assert {k: mine[team][k] for k in MONEY} == {k: finance[team][k] for k in MONEY}, role


@pytest.mark.parametrize("group_by", ["project", "job"])
def test_a_members_projects_and_jobs_add_up_to_what_finance_charges_the_team(clients, window, group_by) -> None:
    finance = _rows(clients["finance"], window, "team")

    for role, team in (("owner", "ml"), ("other_team", "vision")):
        rows = _rows(clients[role], window, group_by)
        assert rows, role
        for column in ("totalCost", "costWithoutTokens", "preemptionWasteCost"):
            assert round(sum(r[column] for r in rows.values()), 2) == finance[team][column], (role, column)


def test_the_members_csv_is_finances_row(clients, window) -> None:
    def csv_row(role: str, team: str) -> list[str]:
        r = clients[role].get("/api/v1/showback/", {"window": window, "format": "csv"})
        assert r.status_code == 200
        [row] = [line for line in r.content.decode().splitlines() if line.startswith(f"{team},")]
        return row.split(",")

    # gpu_hours_idle is empty for a member (no fleet figures) and 0.0000 for finance: the rest agree.
    finance, member = csv_row("finance", "vision"), csv_row("other_team", "vision")
    idle_column = 13
    assert finance[:idle_column] + finance[idle_column + 1:] == member[:idle_column] + member[idle_column + 1:]
