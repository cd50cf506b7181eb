"""A second quota for the same team and GPU type is refused on the field, naming the quota to
change instead, through the API and on the admin's quota page.

Found by QA as a platform engineer: `POST quotas/ {"team": "ml", "gpu_type": "H100-80GB", ...}`
while ml had one answered 400 "Invalid request. The fields team, gpu_type must make a unique
set." under non_field_errors: no field named, no word of the quota that already exists."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.models import Event, Quota
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_duplicate_quota_names_the_existing_one(fleet, admin) -> None:
    existing = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)

    r = admin.post(f"{J}/quotas/", {"team": "ml", "gpu_type": "H100-80GB", "nominal_gpus": 8}, format="json")

    assert r.status_code == 400, r.json()
    body = r.json()
    assert "non_field_errors" not in body["errors"], body
    assert list(body["errors"]) == ["gpu_type"], body
    assert body["errors"]["gpu_type"] == [
        f"team ml already has a quota for H100-80GB: change that one (id {existing.pk})"]
    assert Quota.objects.filter(team=fleet.ml, gpu_type=fleet.h100).count() == 1
    assert not Event.objects.filter(reason="QuotaCreated").exists()


def test_moving_a_quota_onto_a_team_that_has_one_names_team(fleet, admin) -> None:
    a100 = f.make_quota(fleet.vision, fleet.a100, 8)
    f.make_quota(fleet.ml, fleet.a100, 4)
    ml_a100 = Quota.objects.get(team=fleet.ml, gpu_type=fleet.a100)

    r = admin.patch(f"{J}/quotas/{a100.pk}/", {"team": "ml"}, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {
        "team": [f"team ml already has a quota for A100-40GB: change that one (id {ml_a100.pk})"]}
    assert Quota.objects.get(pk=a100.pk).team == fleet.vision


def test_a_quota_saved_as_it_is_and_a_new_type_pass(fleet, admin) -> None:
    existing = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    same = admin.put(f"{J}/quotas/{existing.pk}/", {"team": "ml", "gpu_type": "H100-80GB", "nominal_gpus": 20,
                                                   "borrowing_limit": None, "lending_limit": None}, format="json")
    assert same.status_code == 200, same.json()

    new = admin.post(f"{J}/quotas/", {"team": "ml", "gpu_type": "A100-40GB", "nominal_gpus": 8}, format="json")
    assert new.status_code == 201, new.json()


def test_the_admin_quota_page_refuses_it_on_the_field(fleet) -> None:
    existing = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")

    r = browser.post("/admin/controlplane/quota/add/",
                     {"team": fleet.ml.pk, "gpu_type": fleet.h100.pk, "nominal_gpus": 8})

    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert errors.get("gpu_type") == [f"team ml already has a quota for H100-80GB: change that one (id {existing.pk})"], \
        errors
    assert "__all__" not in errors
    assert Quota.objects.filter(team=fleet.ml, gpu_type=fleet.h100).count() == 1
