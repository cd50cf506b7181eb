"""A priority class's grace period is at most an hour (MAX_GRACE_PERIOD_S), refused beyond it on
the field with the bound named, in the API and on the admin's page alike (PriorityClass.clean).

Found on the admin's walk of the demo (7 Dec): a grace period of 99999999 s (over three years)
was taken without a word. A stop (preemption, cancel, requeue) signals the job, waits the grace
period, then kills it: with that grace a preempted job kept its GPUs for years, so the class was
unpreemptible in effect, and the engine, which plans a reservation a grace period ahead (the
longest of all classes), could backfill nothing in front of any waiting job."""

from __future__ import annotations

import pytest

from controlplane.models import Event, PriorityClass
from controlplane.models.quotas import MAX_GRACE_PERIOD_S
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"
BEYOND = ("99999999 s (1,157 days) is beyond 3600 s (an hour), the longest grace period a class may give: a "
          "stopped job of the class keeps its GPUs that long after its SIGTERM; give the seconds its jobs need "
          "to save a checkpoint and exit (the default is 30)")


def test_the_bound_is_an_hour() -> None:
    assert MAX_GRACE_PERIOD_S == 3600


@pytest.mark.parametrize("grace", [MAX_GRACE_PERIOD_S + 1, 99999999])
def test_a_grace_period_beyond_an_hour_is_a_400_on_its_field(fleet, admin, grace) -> None:
    research = fleet.research
    before = PriorityClass.objects.values().get(pk=research.pk)

    r = admin.patch(f"{J}/priority-classes/{research.pk}/", {"grace_period_s": grace}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["grace_period_s"], r.json()
    said = r.json()["errors"]["grace_period_s"][0]
    assert said.startswith(f"{grace} s") and "is beyond 3600 s (an hour), the longest grace period" in said, said
    assert PriorityClass.objects.values().get(pk=research.pk) == before
    assert not Event.objects.filter(reason="PriorityClassChanged").exists()


def test_the_api_says_the_bound_and_what_the_grace_does(fleet, admin) -> None:
    r = admin.post(f"{J}/priority-classes/", {"name": "slow", "value": 5, "grace_period_s": 99999999}, format="json")

    assert r.status_code == 400 and r.json()["errors"] == {"grace_period_s": [BEYOND]}, r.json()
    assert not PriorityClass.objects.filter(name="slow").exists()


@pytest.mark.parametrize("grace", [0, 30, MAX_GRACE_PERIOD_S])
def test_a_grace_period_up_to_an_hour_is_taken(fleet, admin, grace) -> None:
    r = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/", {"grace_period_s": grace}, format="json")

    assert r.status_code == 200 and r.json()["grace_period_s"] == grace, r.json()


def test_the_admin_page_refuses_it_on_the_field_in_the_same_words(fleet, browser) -> None:
    path = f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/"

    r = browser.post(path, f.opened_admin_form(browser, path) | {"grace_period_s": 99999999})

    assert r.status_code == 200, "the form was accepted"
    assert dict(r.context["adminform"].form.errors) == {"grace_period_s": [BEYOND]}
    assert PriorityClass.objects.get(pk=fleet.research.pk).grace_period_s == fleet.research.grace_period_s


def test_the_database_refuses_a_grace_period_written_around_the_checks(fleet) -> None:
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        PriorityClass.objects.filter(pk=fleet.research.pk).update(grace_period_s=MAX_GRACE_PERIOD_S + 1)
