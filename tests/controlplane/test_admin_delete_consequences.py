"""Deleting a priority class or a cohort changes the teams that use it: the admin's confirmation
page says so before, and each team's history records it after.

Found on the demo: /admin/controlplane/priorityclass/1/delete/ for `production`, the default
class of team serving, asked only "Priority classes: 1"; once deleted, serving's default became
empty without a word (Team.default_priority_class is SET_NULL), and its jobs submitted without a
class then ran in the lowest class, preemptible, with nothing in serving's trail saying why.
Deleting cohort `shared-fleet` asked "Cohorts: 1" although its three teams would stop lending
and borrowing; the teams' own histories recorded no move.
"""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import EventKind
from controlplane.models import Cohort, Event, PriorityClass, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _text(response: Any) -> str:
    assert response.status_code == 200
    return " ".join(response.content.decode().split())


def test_the_confirmation_page_names_the_teams_whose_default_class_goes(fleet, browser) -> None:
    f.make_priority_class("batch", 10)

    page = _text(browser.get(f"/admin/controlplane/priorityclass/{fleet.production.pk}/delete/"))

    assert ("Team vision: its default class becomes none; its jobs submitted without a class will get "
            "batch (10), the lowest class") in page


def test_a_deleted_default_class_is_recorded_on_each_team_that_had_it(fleet, browser) -> None:
    f.make_priority_class("batch", 10)

    r = browser.post(f"/admin/controlplane/priorityclass/{fleet.production.pk}/delete/", {"post": "yes"})

    assert r.status_code == 302 and not PriorityClass.objects.filter(name="production").exists()
    assert Team.objects.get(name="vision").default_priority_class is None
    [event] = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="TeamChanged")
    assert event.team == fleet.vision and event.actor == "user:boss"
    assert event.data["before"]["default_priority_class"] == "production (1000)"
    assert event.data["after"]["default_priority_class"] is None
    assert event.message == ("Team vision changed: default priority class production (1000) → none "
                             "(class production deleted)")


def test_the_same_when_the_class_is_deleted_from_the_list(fleet, browser) -> None:
    r = browser.post("/admin/controlplane/priorityclass/", {
        "action": "delete_selected", "_selected_action": [fleet.production.pk], "post": "yes"})

    assert r.status_code == 302
    assert Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="TeamChanged", team=fleet.vision).count() == 1


def test_the_confirmation_page_names_the_teams_that_leave_a_cohort(fleet, browser) -> None:
    cohort = Cohort.objects.get(name="all")

    page = _text(browser.get(f"/admin/controlplane/cohort/{cohort.pk}/delete/"))

    assert "Team ml leaves the cohort: it no longer lends or borrows" in page
    assert "Team vision leaves the cohort: it no longer lends or borrows" in page


@pytest.mark.parametrize("how", ["page", "list"])
def test_each_team_of_a_deleted_cohort_records_that_it_left(fleet, browser, how) -> None:
    cohort = Cohort.objects.get(name="all")

    if how == "page":
        r = browser.post(f"/admin/controlplane/cohort/{cohort.pk}/delete/", {"post": "yes"})
    else:
        r = browser.post("/admin/controlplane/cohort/", {
            "action": "delete_selected", "_selected_action": [cohort.pk], "post": "yes"})

    assert r.status_code == 302 and not Cohort.objects.exists()
    moves = Event.objects.filter(kind=EventKind.COHORT_CHANGED, reason="TeamCohortChanged").order_by("team__name")
    assert [(e.team.name, e.message) for e in moves] == [
        ("ml", "Team ml left cohort all: it no longer lends or borrows (cohort all deleted)"),
        ("vision", "Team vision left cohort all: it no longer lends or borrows (cohort all deleted)"),
    ]
    assert all(e.actor == "user:boss" and e.data["after"] == {"cohort": None} for e in moves)


def test_a_deleted_team_leaves_the_deletion_of_its_quotas_projects_and_memberships_in_the_trail(fleet, browser) -> None:
    """Found on the demo: team tmpteam, created with an 8-GPU H100 quota and deleted a minute
    later, left 'Quota of tmpteam on H100-80GB created: nominal 8' and 'Team tmpteam deleted'
    in the trail, and nothing of its quota's deletion (cascaded), so a reader of the quota
    events believed tmpteam still held a guarantee."""
    team = f.make_team("tmpteam", cohort=Cohort.objects.get(name="all"))
    f.make_quota(team, fleet.h100, 8)
    f.make_project(team, "scratch")
    f.make_user("tess", team=team)

    r = browser.post(f"/admin/controlplane/team/{team.pk}/delete/", {"post": "yes"})

    assert r.status_code == 302 and not Team.objects.filter(name="tmpteam").exists()
    said = {e.reason: e.message for e in Event.objects.filter(actor="user:boss")}
    assert said["QuotaDeleted"] == ("Quota of tmpteam on H100-80GB deleted: was nominal 8, borrowing limit none "
                                    "(team tmpteam deleted)")
    assert said["ProjectDeleted"].startswith("Project scratch deleted")
    assert said["MembershipDeleted"].startswith("Membership of tess in tmpteam deleted")
    assert said["TeamDeleted"].startswith("Team tmpteam deleted")
    assert said["TeamCohortChanged"] == "Team tmpteam left cohort all: it no longer lends or borrows (team tmpteam deleted)"
