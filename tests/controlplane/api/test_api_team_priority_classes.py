"""A team's members submit only in the priority classes an admin chose for it.

Found by the security audit (6 Dec): any member could submit in any class, so a researcher gave
their own training run `production` (the demo's serving class: value 1000, never preempted,
preempting everything below) by naming it, at submit, in a job array or by `PATCH` of a waiting
job; priorities are an organisation's decision, not each submitter's. Now `Team.priority_classes`
(empty: every class, as before) bounds what its members may name; admins may use any class.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.models import Event, Job, PriorityClass, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"
REFUSAL = "team 'ml' may submit in research, not 'production' (an admin chooses a team's priority classes)"


@pytest.fixture
def research_only(fleet) -> Team:
    fleet.ml.priority_classes.set([fleet.research])
    return fleet.ml


def test_a_member_cannot_submit_in_a_class_not_their_teams(fleet, research_only, alice: APIClient) -> None:
    r = alice.post(f"{J}/jobs/", {"name": "mine", "gpus": 1, "priority_class": "production"}, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {"priority_class": [REFUSAL]}
    assert not Job.objects.filter(name="mine").exists()
    ok = alice.post(f"{J}/jobs/", {"name": "mine", "gpus": 1, "priority_class": "research"}, format="json")
    assert ok.status_code == 201 and ok.json()["priority_class"] == "research"
    default = alice.post(f"{J}/jobs/", {"name": "mine", "gpus": 1}, format="json")  # the team's default
    assert default.status_code == 201 and default.json()["priority_class"] == "research"


def test_nor_in_a_job_array(fleet, research_only, alice: APIClient) -> None:
    r = alice.post(f"{J}/job-arrays/", {"name": "sweep", "gpus": 1, "array": "0-3", "priority_class": "production"},
                   format="json")

    assert r.status_code == 400 and r.json()["errors"] == {"priority_class": [REFUSAL]}


def test_nor_by_changing_a_waiting_job(fleet, research_only, alice: APIClient) -> None:
    job = f.make_job(fleet.ml, name="waiting", submitter=fleet.users["owner"])

    r = alice.patch(f"{J}/jobs/{job.pk}/", {"priority_class": "production"}, format="json")

    assert r.status_code == 400 and r.json()["errors"] == {"priority_class": [REFUSAL]}
    assert Job.objects.get(pk=job.pk).priority_class == fleet.research


def test_a_job_already_in_a_class_since_denied_can_still_be_renamed(fleet, alice: APIClient) -> None:
    job = f.make_job(fleet.ml, fleet.production, name="old", submitter=fleet.users["owner"])
    fleet.ml.priority_classes.set([fleet.research])

    r = alice.patch(f"{J}/jobs/{job.pk}/", {"name": "renamed"}, format="json")

    assert r.status_code == 200, r.json()
    assert Job.objects.get(pk=job.pk).name == "renamed"


def test_an_admin_submits_in_any_class_for_any_team(fleet, research_only, admin: APIClient) -> None:
    r = admin.post(f"{J}/jobs/", {"name": "urgent", "gpus": 1, "team": "ml", "priority_class": "production"},
                   format="json")

    assert r.status_code == 201 and r.json()["priority_class"] == "production"


def test_a_team_with_no_classes_chosen_uses_every_class(fleet, alice: APIClient) -> None:
    r = alice.post(f"{J}/jobs/", {"name": "mine", "gpus": 1, "priority_class": "production"}, format="json")

    assert r.status_code == 201


def test_the_submit_check_of_the_page_says_the_same(fleet, research_only) -> None:
    from django.test import Client

    client = Client()
    client.force_login(fleet.users["owner"])
    body = client.post("/ui/jobs/check.json", {"name": "m", "gpus": 1, "priority_class": "production"},
                       content_type="application/json").json()

    assert body["runs"] is False and body["errors"] == {"priority_class": [REFUSAL]}


def test_admins_choose_a_teams_classes_through_the_api_and_it_is_recorded(fleet, admin: APIClient,
                                                                          clients: dict[str, Any]) -> None:
    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"priority_classes": ["research"]}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["priority_classes"] == ["research"]
    assert list(fleet.ml.priority_classes.values_list("name", flat=True)) == ["research"]
    event = Event.objects.filter(kind="config.changed", reason="TeamChanged").latest("id")
    assert event.message == "Team ml changed: priority classes any → research"
    assert clients["owner"].get(f"{J}/teams/{fleet.ml.pk}/").json()["priority_classes"] == ["research"]
    assert clients["owner"].patch(f"{J}/teams/{fleet.ml.pk}/", {"priority_classes": []},
                                  format="json").status_code == 403  # members do not choose their own


def test_a_teams_default_class_must_be_one_it_may_use(fleet, admin: APIClient) -> None:
    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"priority_classes": ["production"]}, format="json")

    assert r.status_code == 400
    assert r.json()["errors"] == {"default_priority_class": [
        "the team's default class research is not among the classes it may use (production): choose one of "
        "those, or tick research too"]}
    assert not fleet.ml.priority_classes.exists()
    assert PriorityClass.objects.count() == 2


def test_a_class_named_twice_is_refused_naming_it(fleet, admin: APIClient) -> None:
    """A script building the list from several sources named production twice: the refusal of the
    default read "(production, production)", as if the team had two classes of that name; then
    (until 7 Dec) such a list was taken as a set, read back shorter than it was sent. Each class
    is given once, as a job's GPU types are (services/given_once.py)."""
    r = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"priority_classes": ["production", "production"]}, format="json")

    assert r.status_code == 400
    assert r.json()["errors"] == {"priority_classes": ["'production' is given twice: give each name once"]}
    assert not fleet.ml.priority_classes.exists()
    refused = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"priority_classes": ["research", "production", "research"]},
                          format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"] == {"priority_classes": ["'research' is given twice: give each name once"]}
    assert not fleet.ml.priority_classes.exists()
    # each once: taken, in the answer and in the trail
    ok = admin.patch(f"{J}/teams/{fleet.ml.pk}/", {"priority_classes": ["research", "production"]}, format="json")
    assert ok.status_code == 200, ok.json()
    assert ok.json()["priority_classes"] == ["production", "research"]
    event = Event.objects.filter(kind="config.changed", reason="TeamChanged").latest("id")
    assert event.message == "Team ml changed: priority classes any → production, research"
