"""An `Accept` header that asks for no format an endpoint renders (`application/xml`, `text/csv`
on a JSON endpoint) is answered 406 in the API's error shape, and the schema says so on every
operation: it listed 400, 401, 403, 404 and 429, and a client (or schemathesis) sending such a
header met a status the schema does not describe (found by probing headers by hand)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("method", "path"), [
    ("get", "/api/v1/jobs/"), ("get", "/api/v1/auth/me/"), ("get", "/api/v1/showback/"),
    ("get", "/api/v1/jobs/history.csv"), ("get", "/api/v1/jobs/history.xlsx"), ("post", "/api/v1/jobs/"),
    ("get", "/api/v1/nodes/"),
])
def test_an_accept_header_no_renderer_meets_is_a_documented_406(fleet, alice, method, path) -> None:
    r = getattr(alice, method)(path, HTTP_ACCEPT="application/xml")

    assert r.status_code == 406 and r["Content-Type"] == "application/json", r.content[:200]
    assert r.json()["code"] == "not_acceptable"
    operation = alice.get("/api/schema/?format=json").json()["paths"][path][method]
    assert "406" in operation["responses"], sorted(operation["responses"])


def test_every_operation_documents_406(fleet, alice) -> None:
    paths = alice.get("/api/schema/?format=json").json()["paths"]

    missing = [f"{m.upper()} {p}" for p, ops in paths.items() for m, op in ops.items() if "406" not in op["responses"]]

    assert missing == []
