"""A team in no cohort borrows from no one and lends to no one, so a borrowing or lending limit
set on its quota is refused on the field, through the API and the admin's quota page alike.

Found on the demo (4 Dec): `POST quotas/ {"team": "solo", "nominal_gpus": 8, "borrowing_limit":
16, "lending_limit": 4}` for a team in no cohort answered 201; `qm quotas` then read MAY BORROW 16
while solo's second 8-GPU job waited "team solo uses 8 of 8 nominal H100-80GB GPUs and can borrow
0 more". A limit the quota already had passes the check (the team's admin page checks its quota
rows before saving the move that clears them: test_quota_limits_cleared_leaving_cohort.py), so
its nominal can still be changed; 0 or empty is always taken."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.models import Event, Quota
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.fixture
def solo(fleet):
    return f.make_team("solo")


def test_a_borrowing_and_a_lending_limit_for_a_team_in_no_cohort_are_refused_on_their_fields(fleet, admin, solo) -> None:
    r = admin.post(f"{J}/quotas/", {"team": "solo", "gpu_type": "H100-80GB", "nominal_gpus": 8,
                                    "borrowing_limit": 16, "lending_limit": 4}, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {
        "borrowing_limit": ["team solo is in no cohort, so it borrows from no one: a borrowing limit of 16 would "
                            "never apply; put the team in a cohort first (its cohort field), or leave borrowing_limit "
                            "empty"],
        "lending_limit": ["team solo is in no cohort, so it lends to no one: a lending limit of 4 would never "
                          "apply; put the team in a cohort first (its cohort field), or leave lending_limit empty"],
    }
    assert not Quota.objects.filter(team=solo).exists()
    assert not Event.objects.filter(reason="QuotaCreated").exists()


def test_a_limit_raised_on_a_team_in_no_cohort_is_refused_and_nothing_written(fleet, admin, solo) -> None:
    quota = f.make_quota(solo, fleet.h100, 8)

    r = admin.patch(f"{J}/quotas/{quota.pk}/", {"borrowing_limit": 8}, format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["borrowing_limit"], r.json()
    quota.refresh_from_db()
    assert quota.borrowing_limit is None
    assert not Event.objects.filter(reason="QuotaChanged").exists()


def test_zero_empty_and_a_limit_kept_from_a_former_cohort_are_taken(fleet, admin, solo) -> None:
    ok = admin.post(f"{J}/quotas/", {"team": "solo", "gpu_type": "H100-80GB", "nominal_gpus": 8,
                                     "borrowing_limit": 0, "lending_limit": None}, format="json")
    assert ok.status_code == 201, ok.json()
    # ml leaves its cohort with its borrowing limit of 8: changing its nominal is no problem
    ml_quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    Quota.objects.filter(pk=ml_quota.pk).update(borrowing_limit=8)
    fleet.ml.cohort = None
    fleet.ml.save()
    r = admin.patch(f"{J}/quotas/{ml_quota.pk}/", {"nominal_gpus": 24}, format="json")
    assert r.status_code == 200 and r.json()["borrowing_limit"] == 8, r.json()
    # and a team in a cohort sets any limit, as before
    assert admin.patch(f"{J}/quotas/{Quota.objects.get(team=fleet.vision).pk}/",
                       {"borrowing_limit": 16, "lending_limit": 4}, format="json").status_code == 200


def test_the_admin_quota_page_says_the_same_on_the_field(fleet, solo) -> None:
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")

    r = browser.post("/admin/controlplane/quota/add/",
                     {"team": solo.pk, "gpu_type": fleet.h100.pk, "nominal_gpus": 8, "borrowing_limit": 16})

    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert errors.get("borrowing_limit") == [
        "team solo is in no cohort, so it borrows from no one: a borrowing limit of 16 would never apply; put the "
        "team in a cohort first (its cohort field), or leave Borrowing limit empty"], errors
    assert not Quota.objects.filter(team=solo).exists()
