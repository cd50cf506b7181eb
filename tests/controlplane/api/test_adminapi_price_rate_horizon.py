"""A price starts at most five years from now (`PriceRate.clean`: the API and the admin alike).

Found on a product walk (5 Dec): `POST price-rates/` with `"effective_from": "9999-12-31T00:00:00Z"`
answered 201, and so did the admin's add page. A rate nobody can mean (a mistyped year: 2062 for
2026, 9999 for "until further notice") then ended the rate before it "in force until 9999-12-31",
and sat in the price book for ever. Finance enters a contract's prices up front, a three-year
reservation's step-ups included: five years ahead is room for them, not for a typo of the year."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from controlplane.models import PriceRate
from controlplane.models.fleet import PRICE_HORIZON_YEARS, price_horizon
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
URL = "/api/v1/price-rates/"


def _body(effective_from: str) -> dict[str, str]:
    return {"gpu_type": "A100-40GB", "capacity_tier": "spot", "usd_per_gpu_hour": "0.9000",
            "effective_from": effective_from}


def _instant(at: timezone.datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize("too_late", ["9999-12-31T00:00:00Z", "2062-01-01T00:00:00+01:00", "beyond"])
def test_a_start_beyond_the_horizon_is_a_400_naming_it_and_writes_nothing(fleet, admin, too_late) -> None:
    if too_late == "beyond":
        too_late = _instant(price_horizon(timezone.now()) + timedelta(hours=1))

    r = admin.post(URL, _body(too_late), format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["effective_from"], r.json()
    said = r.json()["errors"]["effective_from"][0]
    assert f"is more than {PRICE_HORIZON_YEARS} years ahead" in said and "was the year mistyped?" in said, said
    assert not PriceRate.objects.filter(gpu_type=fleet.a100).exists()


def test_a_start_within_the_horizon_is_taken(fleet, admin) -> None:
    at = price_horizon(timezone.now()) - timedelta(days=1)

    r = admin.post(URL, _body(_instant(at)), format="json")

    assert r.status_code == 201, r.json()
    assert PriceRate.objects.get(pk=r.json()["id"]).effective_from == at.replace(microsecond=0)


def test_moving_a_start_beyond_the_horizon_is_refused_and_changes_nothing(fleet, admin) -> None:
    rate = PriceRate.objects.get(gpu_type=fleet.h100)
    before = rate.effective_from

    r = admin.patch(f"{URL}{rate.pk}/", {"effective_from": "9999-12-31T00:00:00Z"}, format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["effective_from"], r.json()
    rate.refresh_from_db()
    assert rate.effective_from == before


def test_a_rate_stored_beyond_the_horizon_before_the_rule_may_still_be_corrected(fleet, admin) -> None:
    """Only a start given is judged: a rate stored before 6 Dec with a start of 9999 can have its
    price changed, and its start moved back within the horizon."""
    stored = f.make_price_rate(fleet.a100, "1.0000", "spot", timezone.now().replace(year=9999))

    r = admin.patch(f"{URL}{stored.pk}/", {"usd_per_gpu_hour": "1.2000"}, format="json")
    assert r.status_code == 200, r.json()
    r = admin.patch(f"{URL}{stored.pk}/", {"effective_from": _instant(timezone.now() + timedelta(days=30))},
                    format="json")
    assert r.status_code == 200, r.json()
