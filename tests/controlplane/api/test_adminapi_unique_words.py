"""A second project of one name in a team, or a second price for one GPU type, tier and start, is
refused on the field, naming the record to change instead (as a second quota is:
test_adminapi_quota_duplicate.py), in the API and on the admin's pages.

Found by QA as a platform engineer: `POST projects/ {"team": "ml", "name": "llm"}` answered
"The fields team, name must make a unique set." and a duplicate price "The fields gpu_type,
capacity_tier, effective_from must make a unique set.", under non_field_errors."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane.models import PriceRate, Project

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_second_project_of_one_name_names_the_existing_one(fleet, admin) -> None:
    r = admin.post(f"{J}/projects/", {"team": "ml", "name": "llm"}, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {"name": [f"team ml already has a project llm: change that one (id {fleet.llm.pk})"]}
    assert Project.objects.filter(team=fleet.ml, name="llm").count() == 1
    assert admin.post(f"{J}/projects/", {"team": "vision", "name": "llm"}, format="json").status_code == 201


def test_a_second_price_from_one_moment_names_the_existing_one(fleet, admin) -> None:
    rate = PriceRate.objects.get(gpu_type=fleet.h100)
    body = {"gpu_type": "H100-80GB", "capacity_tier": rate.capacity_tier, "usd_per_gpu_hour": "3.0000",
            "effective_from": rate.effective_from.isoformat()}

    r = admin.post(f"{J}/price-rates/", body, format="json")

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {"effective_from": [
        f"H100-80GB on_demand already has a price from {rate.effective_from:%Y-%m-%d %H:%M} UTC: change that one "
        f"(id {rate.pk}), or start this one at another time"]}
    assert PriceRate.objects.count() == 1


def test_the_admin_price_page_says_the_same(fleet) -> None:
    from datetime import UTC, datetime

    from tests.controlplane import factories as f
    rate = f.make_price_rate(fleet.a100, "1.2000", effective_from=datetime(2026, 6, 1, tzinfo=UTC))
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")

    r = browser.post("/admin/controlplane/pricerate/add/", {
        "gpu_type": fleet.a100.pk, "capacity_tier": rate.capacity_tier, "usd_per_gpu_hour": "3.0",
        "effective_from_0": f"{rate.effective_from:%Y-%m-%d}", "effective_from_1": f"{rate.effective_from:%H:%M:%S}"})

    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert list(errors) == ["effective_from"], errors
    assert f"change that one (id {rate.pk})" in errors["effective_from"][0]
    assert PriceRate.objects.filter(gpu_type=fleet.a100).count() == 1
