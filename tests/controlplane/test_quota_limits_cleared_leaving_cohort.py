"""A team that leaves its cohort for none has its quotas' borrowing and lending limits cleared,
each recorded, whether it is moved on its admin page, through the API, or its cohort is deleted
(admin or API); moving to another cohort keeps them.

Found on the demo (4 Dec): ml left cohort all on its team page keeping a borrowing limit of 8 and
a lending limit of 4 on its H100 quota, and nothing said so: the API's quota gave
`"borrowing_limit": 8, "cohort": null` while `qm quotas` and the admin read "none (no cohort)",
and a limit on a quota of a team in no cohort is refused when set (test_adminapi_quota_limits_
without_cohort.py). Once ml joined another cohort, the limits set for the old one applied there
unseen. Clearing them keeps the rule one: no quota of a team in no cohort holds a limit."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from controlplane.models import Event, Quota, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, client_for

pytestmark = pytest.mark.django_db
J = "/api/v1"
WHY = ("(team ml left cohort all: in no cohort it borrows and lends nothing, so its quota keeps no borrowing or "
       "lending limit; set them again once it joins a cohort)")


@pytest.fixture
def ml_limited(fleet: Fleet) -> Quota:
    """ml's H100 quota (nominal 16, cohort all) with a borrowing limit of 8 and a lending limit of 4."""
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    Quota.objects.filter(pk=quota.pk).update(borrowing_limit=8, lending_limit=4)
    return quota


def _cleared(quota: Quota, actor: str) -> Event:
    quota.refresh_from_db()
    assert (quota.borrowing_limit, quota.lending_limit) == (None, None)
    [event] = Event.objects.filter(reason="QuotaChanged", team=quota.team)
    assert event.actor == actor
    assert event.message == ("Quota of ml on H100-80GB changed: borrowing limit 8 → none, lending limit 4 → none "
                             + WHY)
    assert (event.data["before"]["borrowing_limit"], event.data["after"]["lending_limit"]) == (8, None)
    return event


def _team_page(browser: Any, team: Team) -> tuple[str, dict[str, Any]]:
    path = f"/admin/controlplane/team/{team.pk}/change/"
    return path, f.opened_admin_form(browser, path)


def test_leaving_the_cohort_on_the_team_page_clears_the_limits_and_says_so(fleet, browser, ml_limited) -> None:
    path, form = _team_page(browser, fleet.ml)
    form["cohort"] = ""

    r = browser.post(path, form, follow=True)

    assert r.status_code == 200 and r.redirect_chain, r.content[:2000]
    _cleared(ml_limited, "user:boss")
    [move] = Event.objects.filter(reason="TeamCohortChanged", team=fleet.ml)
    assert move.message == ("Team ml left cohort all: it no longer lends or borrows; its quotas' limits are cleared "
                            "(H100-80GB: borrowing limit 8, lending limit 4)")
    assert move.data["limits_cleared"] == ["H100-80GB: borrowing limit 8, lending limit 4"]
    said = [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]
    assert ("Team ml left cohort all: in no cohort it borrows and lends nothing, so its quotas' borrowing and lending "
            "limits were cleared (H100-80GB: borrowing limit 8, lending limit 4), each recorded as a quota change. "
            "Set them again once it joins a cohort.") in said, said


def test_a_quota_row_changed_in_the_same_save_does_not_bring_the_limits_back(fleet, browser, ml_limited) -> None:
    path, form = _team_page(browser, fleet.ml)
    form["cohort"] = ""
    [row] = [k for k in form if k.startswith("quotas-") and k.endswith("-nominal_gpus")]
    form[row] = 24

    r = browser.post(path, form)

    assert r.status_code == 302, r.content[:2000]
    ml_limited.refresh_from_db()
    assert (ml_limited.nominal_gpus, ml_limited.borrowing_limit, ml_limited.lending_limit) == (24, None, None)
    changes = list(Event.objects.filter(reason="QuotaChanged").order_by("pk").values_list("message", flat=True))
    assert changes == ["Quota of ml on H100-80GB changed: nominal 16 → 24",
                       "Quota of ml on H100-80GB changed: borrowing limit 8 → none, lending limit 4 → none " + WHY]


def test_a_new_limit_in_the_same_save_is_refused_on_its_field(fleet, browser, ml_limited) -> None:
    path, form = _team_page(browser, fleet.ml)
    form["cohort"] = ""
    [row] = [k for k in form if k.startswith("quotas-") and k.endswith("-borrowing_limit")]
    form[row] = 12

    r = browser.post(path, form)

    assert r.status_code == 200
    [formset] = [s.formset for s in r.context["inline_admin_formsets"] if s.formset.model is Quota]
    assert "team ml is in no cohort, so it borrows from no one" in str(formset.errors[0]["borrowing_limit"])
    assert Team.objects.get(pk=fleet.ml.pk).cohort_id is not None
    assert not f.trail().exists()


def test_leaving_through_the_api_clears_them_and_the_quota_reads_none(fleet, ml_limited) -> None:
    admin = client_for(fleet, "admin")

    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"cohort": None}, format="json")

    assert r.status_code == 200, r.json()
    # the answer says what leaving cleared, as the event does (before, only the event said it)
    assert r.json()["limits_cleared"] == ["H100-80GB: borrowing limit 8, lending limit 4"]
    assert admin.get(f"{J}/teams/{fleet.ml.pk}/").json()["limits_cleared"] == []
    _cleared(ml_limited, "user:root")
    quota = admin.get(f"{J}/quotas/{ml_limited.pk}/").json()
    assert (quota["cohort"], quota["borrowing_limit"], quota["lending_limit"]) == (None, None, None)


def test_deleting_the_cohort_says_it_first_and_clears_them(fleet, ml_limited) -> None:
    admin = client_for(fleet, "admin")

    r = admin.delete(f"{J}/cohorts/{fleet.ml.cohort_id}/")

    assert r.status_code == 200, r.content
    assert ("Team ml leaves the cohort: it no longer lends or borrows; its quotas' borrowing and lending limits are "
            "cleared (H100-80GB: borrowing limit 8, lending limit 4): in no cohort they would never apply"
            ) in r.json()["consequences"]
    event = _cleared(ml_limited, "user:root")
    assert event.message.endswith(WHY)


def test_deleting_the_cohort_in_the_admin_list_clears_them_too(fleet, browser, ml_limited) -> None:
    r = browser.post("/admin/controlplane/cohort/", {"action": "delete_selected", "index": 0, "post": "yes",
                                                     "_selected_action": [fleet.ml.cohort_id]})

    assert r.status_code == 302
    _cleared(ml_limited, "user:boss")


def test_moving_to_another_cohort_keeps_them(fleet, ml_limited) -> None:
    other = f.make_cohort("other")
    admin = client_for(fleet, "admin")

    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"cohort": "other"}, format="json")
    assert r.status_code == 200 and r.json()["limits_cleared"] == []

    ml_limited.refresh_from_db()
    assert (ml_limited.borrowing_limit, ml_limited.lending_limit) == (8, 4)
    assert Team.objects.get(pk=fleet.ml.pk).cohort == other
    assert not Event.objects.filter(reason="QuotaChanged").exists()


def test_deleting_the_team_records_its_quota_deleted_not_changed(fleet, browser) -> None:
    team = f.make_team("sunset", cohort=fleet.ml.cohort)
    f.make_quota(team, fleet.h100, 4, borrowing_limit=2)

    r = browser.post(f"/admin/controlplane/team/{team.pk}/delete/", {"post": "yes"})

    assert r.status_code == 302
    assert list(Event.objects.filter(kind="quota.changed").values_list("reason", flat=True)) == ["QuotaDeleted"]


@pytest.mark.django_db(transaction=True)
def test_migration_0034_clears_the_limits_teams_in_no_cohort_kept_and_records_each() -> None:
    before, after = [("controlplane", "0033_quota_drop_cpu_memory")], [("controlplane", "0034_quota_limits_cleared_out_of_cohort")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    apps = executor.loader.project_state(before).apps
    cohort = apps.get_model("controlplane", "Cohort").objects.create(name="all")
    h100 = apps.get_model("controlplane", "GpuType").objects.create(name="H100-80GB", memory_gb=80)
    teams = apps.get_model("controlplane", "Team").objects
    quotas = apps.get_model("controlplane", "Quota").objects
    solo = quotas.create(team=teams.create(name="solo"), gpu_type=h100, nominal_gpus=8, borrowing_limit=8)
    member = quotas.create(team=teams.create(name="ml", cohort=cohort), gpu_type=h100, nominal_gpus=8,
                           borrowing_limit=8, lending_limit=4)
    bare = quotas.create(team=teams.create(name="bare"), gpu_type=h100, nominal_gpus=8)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(after)

        got = {q.team.name: (q.borrowing_limit, q.lending_limit)
               for q in Quota.objects.filter(pk__in=[solo.pk, member.pk, bare.pk]).select_related("team")}
        assert got == {"solo": (None, None), "ml": (8, 4), "bare": (None, None)}
        [event] = Event.objects.filter(kind="quota.changed")
        assert (event.actor, event.reason, event.team_id) == ("migration:0034", "QuotaChanged", solo.team_id)
        assert event.message.startswith("Quota of solo on H100-80GB changed: borrowing limit 8 → none (team solo is "
                                        "in no cohort")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
