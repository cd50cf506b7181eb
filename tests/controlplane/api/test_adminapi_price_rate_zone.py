"""`POST/PATCH price-rates/`: an `effective_from` with no time zone is refused on the field, saying
to give one, as showback refuses a window's naive instant. Found by the finance journey (2 Dec):
`"effective_from": "2026-12-01T00:00:00"` was read as UTC without a word, so a rate meant from
midnight in New York began five hours early, and repriced that much GPU time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.models import PriceRate

pytestmark = pytest.mark.django_db
URL = "/api/v1/price-rates/"


def _body(effective_from: str) -> dict[str, str]:
    return {"gpu_type": "A100-40GB", "capacity_tier": "spot", "usd_per_gpu_hour": "0.9000",
            "effective_from": effective_from}


@pytest.mark.parametrize("naive", ["2026-12-01T00:00:00", "2026-12-01 00:00", "2026-12-01T05:30:00.250"])
def test_a_naive_start_is_refused_naming_the_field_and_writes_nothing(fleet, admin, naive) -> None:
    r = admin.post(URL, _body(naive), format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["effective_from"]
    said = r.json()["errors"]["effective_from"][0]
    assert f"'{naive}' has no time zone" in said and "Z" in said and "+00:00" in said
    assert not PriceRate.objects.filter(gpu_type=fleet.a100).exists()


def test_a_naive_start_is_refused_on_a_change_too(fleet, admin) -> None:
    rate = PriceRate.objects.get(gpu_type=fleet.h100)
    before = rate.effective_from
    r = admin.patch(f"{URL}{rate.pk}/", {"effective_from": "2026-03-01T00:00:00"}, format="json")
    assert r.status_code == 400 and list(r.json()["errors"]) == ["effective_from"], r.json()
    rate.refresh_from_db()
    assert rate.effective_from == before


@pytest.mark.parametrize(("zoned", "utc"), [
    ("2026-12-01T00:00:00Z", datetime(2026, 12, 1, tzinfo=UTC)),
    ("2026-12-01T00:00:00+00:00", datetime(2026, 12, 1, tzinfo=UTC)),
    ("2026-12-01T00:00:00-05:00", datetime(2026, 12, 1, 5, tzinfo=UTC)),
])
def test_a_zoned_start_is_taken_at_its_instant(fleet, admin, zoned, utc) -> None:
    r = admin.post(URL, _body(zoned), format="json")
    assert r.status_code == 201, r.json()
    assert PriceRate.objects.get(pk=r.json()["id"]).effective_from == utc
