"""A team whose classes an admin chose, and which has no default class, gives its members' jobs
submitted without a class the lowest class the team may use, not the lowest class there is.

Found on the demo: serving may submit in production and tmp, its default tmp. Deleting tmp
answered "Team serving: its default class becomes none; its jobs submitted without a class will
get best-effort (10), the lowest class", and from then on every submit of a serving member that
named no class was refused: "team 'serving' may submit in production, not 'best-effort'", a
class they never asked for. The same followed `PATCH teams/{id}/ {"default_priority_class":
null}` on any team with chosen classes (taken: no default is allowed). A team with no chosen
classes may use every class, so its jobs still get the lowest class there is."""

from __future__ import annotations

import pytest

from controlplane.models import Job, Team
from controlplane.services import jobs as job_service
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.fixture
def ml_limited(fleet) -> Team:  # type: ignore[no-untyped-def]
    """ml may submit in production (1000) and tmp (500), its default tmp; research (100) is not ml's."""
    tmp = f.make_priority_class("tmp", 500)
    fleet.ml.priority_classes.set([fleet.production, tmp])
    fleet.ml.default_priority_class = tmp
    fleet.ml.save()
    return fleet.ml


def test_deleting_a_teams_default_leaves_its_classless_submits_the_lowest_class_it_may_use(
        fleet, admin, alice, ml_limited) -> None:
    tmp = ml_limited.default_priority_class

    r = admin.delete(f"{J}/priority-classes/{tmp.pk}/")

    assert r.status_code == 200, r.json()
    assert ("Team ml: its default class becomes none; its jobs submitted without a class will get production (1000), "
            "the lowest class it may use") in r.json()["consequences"][0]
    r = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 1, "command": "true"}, format="json")
    assert r.status_code == 201, r.json()
    assert r.json()["priority_class"] == "production"


def test_no_default_set_through_the_api_gives_the_lowest_chosen_class(fleet, admin, alice, ml_limited) -> None:
    r = admin.patch(f"{J}/teams/{ml_limited.pk}/", {"default_priority_class": None}, format="json")
    assert r.status_code == 200, r.json()

    r = alice.post(f"{J}/jobs/", {"name": "x", "team": "ml", "gpus": 1, "command": "true"}, format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["priority_class"] == "tmp"  # 500, below production's 1000; research (100) is not ml's


def test_a_team_with_every_class_and_no_default_gets_the_lowest_class_there_is(fleet, admin, alice) -> None:
    Team.objects.filter(pk=fleet.ml.pk).update(default_priority_class=None)

    r = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 1, "command": "true"}, format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["priority_class"] == "research"


def test_a_class_named_or_a_default_is_taken_as_before(fleet, alice, ml_limited) -> None:
    named = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 1, "command": "true", "priority_class": "production"},
                       format="json")
    default = alice.post(f"{J}/jobs/", {"name": "y", "gpus": 1, "command": "true"}, format="json")

    assert (named.status_code, default.status_code) == (201, 201)
    assert Job.objects.get(pk=named.json()["id"]).priority_class.name == "production"
    assert Job.objects.get(pk=default.json()["id"]).priority_class.name == "tmp"


@pytest.mark.parametrize("limited", [True, False])
def test_the_embedded_demos_reads_pick_the_class_the_postgresql_statement_does(fleet, ml_limited, limited) -> None:
    """The embedded demo (SQLite) reads a submit's rows through the ORM (`_read_with_orm`):
    it falls back alike."""
    Team.objects.filter(pk=ml_limited.pk).update(default_priority_class=None)
    if not limited:
        ml_limited.priority_classes.clear()
    req = job_service.SubmitRequest(name="x", gpus=1, team="ml")
    alice = fleet.users["owner"]

    _, by_statement, _, _ = job_service._read(alice, req)
    _, by_orm, _, _ = job_service._read_with_orm(alice, req)

    assert by_statement is not None and by_orm is not None
    assert by_statement.name == by_orm.name == ("tmp" if limited else "research")
