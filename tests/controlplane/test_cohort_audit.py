"""Cohort changes are part of the audit trail: a cohort created, changed or deleted, through the
API or the admin UI, is recorded with before and after, as quota changes are.

Found by QA: deleting a cohort (which silently takes its teams out of it, so they stop lending
and borrowing) left no event, while every quota change was recorded. The events are of kind
`cohort.changed` with reasons CohortCreated/CohortChanged/CohortDeleted (and TeamCohortChanged
for a team's move); until migration 0009 they were `quota.changed` events, which that migration
moves to the new kind."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import EventKind
from controlplane.models import Cohort, Event, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import GENEROUS_THROTTLE_RATES, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _test_settings(settings: Any) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": GENEROUS_THROTTLE_RATES}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _cohort_events() -> list[Event]:
    return list(Event.objects.filter(reason__startswith="Cohort").order_by("id"))


# ------------------------------------------------------------------------------------ API


def test_a_cohort_created_changed_and_deleted_through_the_api_is_recorded(fleet) -> None:
    admin = client_for(fleet, "admin")

    r = admin.post("/api/v1/cohorts/", {"name": "gpu-rich", "description": "lenders"}, format="json")
    assert r.status_code == 201, r.data
    cohort_id = r.data["id"]
    Team.objects.filter(name="vision").update(cohort_id=cohort_id)
    r = admin.patch(f"/api/v1/cohorts/{cohort_id}/", {"description": "the lenders"}, format="json")
    assert r.status_code == 200, r.data
    r = admin.delete(f"/api/v1/cohorts/{cohort_id}/")
    assert r.status_code == 200  # with its teams: the answer names them (test_adminapi_delete_consequences.py)
    assert r.json()["consequences"] == ["Team vision leaves the cohort: it no longer lends or borrows"]

    created, changed, deleted = _cohort_events()
    for event in (created, changed, deleted):
        assert event.kind == EventKind.COHORT_CHANGED and event.actor == "user:root"
    assert created.reason == "CohortCreated" and created.data["before"] is None
    assert created.data["after"] == {"id": cohort_id, "name": "gpu-rich", "description": "lenders", "teams": []}
    assert changed.reason == "CohortChanged"
    # The line says what moved, readable without the data, as a node's or a GPU type's does.
    assert changed.message == "Cohort gpu-rich changed: description lenders → the lenders"
    assert changed.data["before"]["description"] == "lenders" and changed.data["after"]["description"] == "the lenders"
    assert changed.data["after"]["teams"] == ["vision"]
    assert deleted.reason == "CohortDeleted" and deleted.data["after"] is None
    assert deleted.data["before"] == {"id": cohort_id, "name": "gpu-rich", "description": "the lenders",
                                      "teams": ["vision"]}
    assert "vision" in deleted.message  # the teams that left it, in words too
    assert Team.objects.get(name="vision").cohort is None


def test_cohort_events_are_read_back_through_the_events_api(fleet) -> None:
    admin = client_for(fleet, "admin")
    cohort = Cohort.objects.get(name="all")
    assert admin.delete(f"/api/v1/cohorts/{cohort.pk}/").status_code == 200  # its teams named in the answer

    r = admin.get("/api/v1/events/", {"kind": "cohort.changed", "reason": "CohortDeleted"})

    assert r.status_code == 200 and r.data["count"] == 1
    assert r.data["results"][0]["data"]["before"]["teams"] == ["ml", "vision"]


def test_a_refused_cohort_change_records_nothing(fleet) -> None:
    member = client_for(fleet, "owner")
    cohort = Cohort.objects.get(name="all")

    assert member.delete(f"/api/v1/cohorts/{cohort.pk}/").status_code == 403
    assert client_for(fleet, "admin").post("/api/v1/cohorts/", {"name": "all"}, format="json").status_code == 400

    assert _cohort_events() == [] and Cohort.objects.filter(pk=cohort.pk).exists()


# ------------------------------------------------------------------------------------ admin


def test_a_cohort_added_changed_and_deleted_in_the_admin_is_recorded(fleet, browser) -> None:
    r = browser.post("/admin/controlplane/cohort/add/", {"name": "spare", "description": "idle capacity"})
    assert r.status_code == 302, r.content[:2000]
    cohort = Cohort.objects.get(name="spare")
    r = browser.post(f"/admin/controlplane/cohort/{cohort.pk}/change/", {"name": "spare", "description": "changed"})
    assert r.status_code == 302, r.content[:2000]
    r = browser.post(f"/admin/controlplane/cohort/{cohort.pk}/delete/", {"post": "yes"})
    assert r.status_code == 302 and not Cohort.objects.filter(pk=cohort.pk).exists()

    created, changed, deleted = _cohort_events()
    assert [e.reason for e in (created, changed, deleted)] == ["CohortCreated", "CohortChanged", "CohortDeleted"]
    assert all(e.kind == EventKind.COHORT_CHANGED and e.actor == "user:boss" for e in (created, changed, deleted))
    assert created.data["after"]["description"] == "idle capacity"
    assert changed.data["before"]["description"] == "idle capacity" and changed.data["after"]["description"] == "changed"
    assert deleted.data["before"]["name"] == "spare" and deleted.data["after"] is None


def test_cohorts_deleted_in_bulk_from_the_admin_list_are_each_recorded(fleet, browser) -> None:
    extra = f.make_cohort("extra")
    everyone = Cohort.objects.get(name="all")

    r = browser.post("/admin/controlplane/cohort/", {
        "action": "delete_selected", "_selected_action": [everyone.pk, extra.pk], "post": "yes",
    })

    assert r.status_code == 302 and not Cohort.objects.exists()
    deleted = {e.data["before"]["name"]: e for e in _cohort_events()}
    assert set(deleted) == {"all", "extra"}
    assert deleted["all"].data["before"]["teams"] == ["ml", "vision"] and deleted["extra"].data["before"]["teams"] == []
    assert all(e.reason == "CohortDeleted" and e.actor == "user:boss" for e in deleted.values())


# ------------------------------------------------------------------------- team moves


def _team_moves() -> list[Event]:
    return list(Event.objects.filter(reason="TeamCohortChanged").order_by("id"))


def test_a_team_joining_leaving_or_changing_cohort_through_the_api_is_recorded(fleet) -> None:
    admin = client_for(fleet, "admin")
    assert admin.post("/api/v1/cohorts/", {"name": "spare"}, format="json").status_code == 201
    vision = Team.objects.get(name="vision")
    was = vision.cohort.name

    assert admin.patch(f"/api/v1/teams/{vision.pk}/", {"description": "same cohort"}, format="json").status_code == 200
    assert _team_moves() == []  # nothing moved, nothing recorded
    assert admin.patch(f"/api/v1/teams/{vision.pk}/", {"cohort": "spare"}, format="json").status_code == 200
    assert admin.patch(f"/api/v1/teams/{vision.pk}/", {"cohort": None}, format="json").status_code == 200
    assert admin.post("/api/v1/teams/", {"name": "newcomers", "cohort": "spare"}, format="json").status_code == 201

    moved, left, joined = _team_moves()
    assert moved.message == f"Team vision moved from cohort {was} to spare"
    assert moved.kind == EventKind.COHORT_CHANGED and moved.team == vision and moved.actor == "user:root"
    assert moved.data == {"team": "vision", "before": {"cohort": was}, "after": {"cohort": "spare"}}
    assert left.message == "Team vision left cohort spare: it no longer lends or borrows"
    assert joined.message == "Team newcomers joined cohort spare"


def test_a_team_moved_to_another_cohort_in_the_admin_is_recorded(fleet, browser) -> None:
    spare = Cohort.objects.create(name="spare")
    ml = Team.objects.get(pk=fleet.ml.pk)
    page = browser.get(f"/admin/controlplane/team/{ml.pk}/change/")
    form = {k: v for k, v in f.admin_change_form(page).items() if v is not False}
    form["cohort"] = spare.pk

    r = browser.post(f"/admin/controlplane/team/{ml.pk}/change/", form)

    assert r.status_code == 302, r.context["errors"]
    (moved,) = _team_moves()
    assert moved.data["after"] == {"cohort": "spare"} and moved.actor == "user:boss" and moved.team == ml


# ------------------------------------------------------------------------ migration 0009


@pytest.mark.django_db(transaction=True)
def test_migration_0009_moves_recorded_cohort_events_to_their_own_kind() -> None:
    """Cohort events written before 0009 were quota.changed; after it, one filter on
    cohort.changed finds the whole cohort history, and quota events stay where they were.
    Reversing it puts them back."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    before, after = [("controlplane", "0008_pending_place")], [("controlplane", "0009_cohort_changed_event_kind")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    OldEvent = executor.loader.project_state(before).apps.get_model("controlplane", "Event")
    now = timezone.now()
    reasons = ["CohortCreated", "CohortChanged", "CohortDeleted", "TeamCohortChanged", "QuotaChanged"]
    for reason in reasons:
        OldEvent.objects.create(created_at=now, kind="quota.changed", actor="user:root", reason=reason)
    OldEvent.objects.create(created_at=now, kind="node.state", actor="user:root", reason="CohortLookalike")
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        kinds = dict(Event.objects.values_list("reason", "kind"))
        assert kinds == {**{r: "cohort.changed" for r in reasons[:4]}, "QuotaChanged": "quota.changed",
                         "CohortLookalike": "node.state"}

        executor = MigrationExecutor(connection)
        executor.migrate(before)
        assert set(OldEvent.objects.filter(reason__in=reasons).values_list("kind", flat=True)) == {"quota.changed"}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
