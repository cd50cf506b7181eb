"""`GET jobs/?ordering=` with an empty field in its comma-separated list (`id,,gpus`, a
trailing comma `gpus,`, a leading one `,id`): a 400 naming `ordering`, as any field it does not
sort by is. It was a 500 (a KeyError on the empty name) for the API and for `qm list --sort`."""

from __future__ import annotations

import pytest

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


@pytest.mark.parametrize("value", ["id,,gpus", "gpus,", ",id", ",", "-gpus,,-id"])
def test_an_empty_field_in_the_ordering_is_a_400_naming_ordering(alice, fleet, value) -> None:
    f.make_job(fleet.ml, name="one", gpus=2)

    r = alice.get(J, {"ordering": value})

    assert r.status_code == 400, r.content[:300]
    body = r.json()
    assert list(body["errors"]) == ["ordering"]
    assert "empty" in body["errors"]["ordering"][0]


def test_a_valid_list_still_sorts(alice, fleet) -> None:
    f.make_job(fleet.ml, name="small", gpus=1)
    f.make_job(fleet.ml, name="big", gpus=8)

    r = alice.get(J, {"ordering": "-gpus,id"})

    assert r.status_code == 200
    assert [j["name"] for j in r.json()["results"]] == ["big", "small"]
