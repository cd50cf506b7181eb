"""Lowering a quota's nominal below its stored lending limit is refused on `nominal_gpus`, the
field sent. Found on the demo (2 Dec): `PATCH quotas/4/ {"nominal_gpus": 2}` with a lending limit
of 5 answered 400 on `lending_limit` ("5 is more than nominal_gpus (2)"), a field the request did
not touch, so a client mapping errors to its inputs had nothing to point at."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_nominal_below_the_lending_limit_is_refused_on_nominal_gpus(fleet, admin) -> None:
    quota = fleet.ml.quotas.get()
    assert admin.patch(f"{J}/quotas/{quota.pk}/", {"lending_limit": 5}, format="json").status_code == 200

    r = admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 2}, format="json")

    assert r.status_code == 400 and list(r.json()["errors"]) == ["nominal_gpus"], r.json()
    assert r.json()["errors"]["nominal_gpus"][0] == (
        "2 is below this quota's lending_limit (5): a team lends only its unused nominal quota; lower "
        "lending_limit in the same request, or set it to null to lend all of it")
    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.lending_limit) == (16, 5)
    # Both in one request, as the refusal says: taken.
    ok = admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 2, "lending_limit": 2}, format="json")
    assert ok.status_code == 200 and (ok.json()["nominal_gpus"], ok.json()["lending_limit"]) == (2, 2)
    # A nominal at or above the limit is no problem.
    assert admin.patch(f"{J}/quotas/{quota.pk}/", {"nominal_gpus": 8}, format="json").status_code == 200
