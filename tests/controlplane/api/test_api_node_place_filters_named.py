"""`nodes/?pool=`, `?leaf_switch=` and `?spine=` given a name no node has are a 400 naming the
parameter and listing the names there are, as `?gpu_type=nosuch` always was (one mechanism:
filtersets.NamedRecordFilter). Found by the operator review (7 Dec): `nodes/?pool=nosuch`
answered an empty list, as if the pool had no node, beside `?gpu_type=nosuch`'s 400. The Nodes
page, which filters by the same filterset, refuses it too."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.controlplane.api.test_api_filter_choices_named import refusal

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _names(client, query: dict[str, str]) -> list[str]:
    r = client.get(f"{J}/nodes/", query)
    assert r.status_code == 200, r.content
    return sorted(n["name"] for n in r.json()["results"])


@pytest.mark.parametrize(("parameter", "said"), [
    ("pool", "no pool named 'nosuch': pools are a100, h100"),
    ("leaf_switch", "no leaf switch named 'nosuch': leaf switches are leaf-a, leaf-b, leaf-c"),
    ("spine", "no spine named 'nosuch': spines are spine-1, spine-2"),
    ("gpu_type", "no GPU type named 'nosuch': GPU types are A100-40GB, H100-80GB"),
])
def test_an_unknown_place_is_refused_as_an_unknown_gpu_type_listing_the_names(fleet, alice, parameter, said) -> None:
    assert refusal(alice, "nodes/", {parameter: "nosuch"}) == {parameter: [said]}


def test_a_known_place_still_filters(fleet, alice) -> None:
    assert _names(alice, {"pool": "a100"}) == ["a100-0", "a100-1"]
    assert _names(alice, {"leaf_switch": "leaf-b"}) == ["h100-2", "h100-3"]
    assert _names(alice, {"spine": "spine-2", "pool": "a100"}) == ["a100-0", "a100-1"]


def test_the_nodes_page_refuses_an_unknown_pool_naming_it(fleet) -> None:
    page = Client()
    page.force_login(fleet.users["admin"])
    response = page.get("/nodes/", {"pool": "nosuch"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'data-error-for="pool"' in html and "no pool named &#x27;nosuch&#x27;: pools are a100, h100" in html
