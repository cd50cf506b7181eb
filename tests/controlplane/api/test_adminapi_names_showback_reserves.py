"""A team, priority class or project may not take a name the showback gives its own rows.

Found by a finance walk of the demo (7 Dec): an admin could create a team `__idle__` and a team
`TOTAL` (both valid slugs). With a guarantee each, the team report by team then had two
`__idle__` rows and two `TOTAL` rows in the CSV, on the page and in `qm showback`; in the JSON,
whose `data` is keyed by name, the team `__idle__` was overwritten by the idle capacity, so the
rows no longer added up to `totals` (idle reserved $8.11 over the rows, $8.94 in `totals`), and
a spreadsheet summing the CSV's rows other than "TOTAL" (Excel's SUMIF matches without case)
dropped a team. A project named `__unallocated__` is the name of a team's jobs without a
project (`team/__unallocated__`) in the project report, the same collision.
"""

from __future__ import annotations

import pytest

from controlplane.models import PriorityClass, Project, Team

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.mark.parametrize("name", ["__idle__", "TOTAL", "total", "Total"])
def test_a_team_may_not_take_a_showback_row_name(fleet, admin, name) -> None:
    r = admin.post(f"{J}/teams/", {"name": name}, format="json")

    assert r.status_code == 400, r.json()
    [message] = r.json()["errors"]["name"]
    assert f"'{name}' is a name the showback gives its own rows" in message
    assert not Team.objects.filter(name=name).exists()


def test_a_team_may_not_be_renamed_to_a_showback_row_name(fleet, admin) -> None:
    r = admin.patch(f"{J}/teams/{fleet.vision.pk}/", {"name": "__idle__"}, format="json")

    assert r.status_code == 400, r.json()
    assert "showback" in r.json()["errors"]["name"][0]
    assert Team.objects.get(pk=fleet.vision.pk).name == "vision"


@pytest.mark.parametrize("name", ["__idle__", "TOTAL"])
def test_a_priority_class_may_not_take_a_showback_row_name(fleet, admin, name) -> None:
    r = admin.post(f"{J}/priority-classes/", {"name": name, "value": 5}, format="json")

    assert r.status_code == 400, r.json()
    assert f"'{name}' is a name the showback gives its own rows" in r.json()["errors"]["name"][0]
    assert not PriorityClass.objects.filter(name=name).exists()


def test_a_project_may_not_be_named_as_a_teams_jobs_without_a_project(fleet, admin) -> None:
    r = admin.post(f"{J}/projects/", {"team": "ml", "name": "__unallocated__"}, format="json")

    assert r.status_code == 400, r.json()
    assert "'__unallocated__' is a name the showback gives its own rows" in r.json()["errors"]["name"][0]
    assert not Project.objects.filter(name="__unallocated__").exists()


def test_names_near_them_are_taken(fleet, admin) -> None:
    # Only the exact words (any case for TOTAL, which spreadsheets match without case) are kept.
    for name in ("idle", "totals", "subtotal", "_idle_"):
        r = admin.post(f"{J}/teams/", {"name": name}, format="json")
        assert r.status_code == 201, r.json()
    r = admin.post(f"{J}/projects/", {"team": "ml", "name": "total"}, format="json")
    assert r.status_code == 201, r.json()


def test_a_name_stored_before_the_rule_is_not_judged_again_on_another_change(fleet, admin) -> None:
    team = Team.objects.create(name="total")  # created before 7 Dec, when nothing refused it

    r = admin.patch(f"{J}/teams/{team.pk}/", {"description": "rename me"}, format="json")

    assert r.status_code == 200, r.json()
    r = admin.patch(f"{J}/teams/{team.pk}/", {"name": "finance-total"}, format="json")
    assert r.status_code == 200, r.json()
