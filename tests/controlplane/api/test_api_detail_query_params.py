"""A query parameter an endpoint does not take is a 400 naming it on every GET, not only on the
filtered lists: `GET jobs/5/explain/?verbose=1` and `GET metrics/queue/?team=ml` answered as if
the parameter had been read (the queue of the whole fleet for `?team=ml`)."""

from __future__ import annotations

import pytest

from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.mark.parametrize("path", ["jobs/{id}/", "jobs/{id}/explain/", "metrics/queue/", "metrics/fragmentation/",
                                  "auth/me/"])
def test_an_unknown_parameter_on_a_single_object_endpoint_is_a_400_naming_it(fleet, path) -> None:
    job = f.make_job(fleet.ml)
    r = client_for(fleet, "owner").get(f"{J}/{path.format(id=job.pk)}?team=ml")
    assert r.status_code == 400
    body = r.json()
    assert "team" in str(body), body
    assert "Unknown query parameter" in str(r.json())


def test_the_parameters_such_endpoints_take_still_work(fleet) -> None:
    job = f.make_job(fleet.ml)
    owner = client_for(fleet, "owner")
    assert owner.get(f"{J}/jobs/{job.pk}/?format=json").status_code == 200
    assert owner.get(f"{J}/jobs/{job.pk}/events/?limit=5&offset=0").status_code == 200
    assert owner.get(f"{J}/jobs/?team=ml").status_code == 200  # a list's filter
    assert owner.get(f"{J}/showback/?window=7d").status_code in (200, 403)


def test_a_stranger_still_gets_401_first(fleet) -> None:
    job = f.make_job(fleet.ml)
    assert client_for(fleet, "anonymous").get(f"{J}/jobs/{job.pk}/explain/?verbose=1").status_code == 401
