"""A hook's own endpoints take no list parameters. The viewset declared `format`, `user`,
`limit` and `offset` for all of them, so `GET notification-hooks/5/?user=bob`, `PATCH …?limit=1`
or `POST …/rotate-secret/?offset=3` answered as if the parameter meant something and ignored it.
Now the list alone takes `user`, `limit` and `offset`; every other endpoint refuses them with a
400 naming the parameter, as every other endpoint refuses one it does not take (ApiMixin)."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.models import NotificationHook

pytestmark = pytest.mark.django_db
URL = "/api/v1/notification-hooks/"
BODY = {"url": "https://hooks.slack.com/services/T0/B0/x", "events": ["failed"]}


@pytest.fixture
def hook(alice: APIClient) -> int:
    return int(alice.post(URL, BODY, format="json").json()["id"])


@pytest.mark.parametrize("parameter", ["user", "limit", "offset"])
@pytest.mark.parametrize(("method", "suffix", "body"), [
    ("get", "", None), ("patch", "", {"active": False}), ("put", "", BODY), ("delete", "", None),
    ("post", "rotate-secret/", None), ("post", "test/", None),
    ("get", "deliveries/", None), ("get", "history/", None),
])
def test_a_hooks_own_endpoints_refuse_list_parameters(admin: APIClient, hook: int, parameter: str, method: str,
                                                      suffix: str, body: dict | None) -> None:
    value = "alice" if parameter == "user" else "1"
    before = NotificationHook.objects.get(pk=hook)

    r = getattr(admin, method)(f"{URL}{hook}/{suffix}?{parameter}={value}", body, format="json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert parameter in r.json()["errors"], r.json()
    after = NotificationHook.objects.get(pk=hook)  # nothing changed, nothing sent
    assert (after.active, after.secret, after.url) == (before.active, before.secret, before.url)
    assert not after.deliveries.exists()


def test_the_list_still_takes_them(admin: APIClient, hook: int) -> None:
    r = admin.get(URL, {"user": "alice", "limit": 1, "offset": 0})
    assert r.status_code == 200, r.content
    assert [h["id"] for h in r.json()["results"]] == [hook]
    assert admin.get(URL, {"team": "ml"}).status_code == 400
    created = admin.post(f"{URL}?user=alice", BODY, format="json")  # a create is no list
    assert created.status_code == 400 and "user" in created.json()["errors"], created.content


def test_the_schema_declares_them_on_the_list_alone(admin: APIClient) -> None:
    paths = admin.get("/api/schema/?format=json").json()["paths"]
    declared = {(method, path): sorted(p["name"] for p in op.get("parameters", []) if p["in"] == "query")
                for path, ops in paths.items() if path.startswith(URL) for method, op in ops.items()}

    assert declared.pop(("get", URL)) == ["limit", "offset", "user"]
    assert {key: names for key, names in declared.items() if set(names) & {"user", "limit", "offset"}} == {}
