"""docs/api.md says any API request the database cannot serve is answered 503
`database_unavailable` with `retry_after` and a Retry-After header (errors.database_unavailable;
tests/controlplane/test_ops_database_down.py stops a real PostgreSQL for it), but no operation's
schema listed 503, so a client (or schemathesis) meeting it met a status the schema does not
describe. Now every operation lists 503 with a body that has the answer's fields."""

from __future__ import annotations

import json

import pytest
from django.db import OperationalError

from controlplane.api.errors import database_unavailable

pytestmark = pytest.mark.django_db


def _schema(client) -> dict:
    return client.get("/api/schema/?format=json").json()


def test_every_operation_documents_503(fleet, alice) -> None:
    paths = _schema(alice)["paths"]

    missing = [f"{m.upper()} {p}" for p, ops in paths.items() for m, op in ops.items() if "503" not in op["responses"]]

    assert missing == []


@pytest.mark.parametrize(("method", "path"), [
    ("get", "/api/v1/jobs/"), ("post", "/api/v1/jobs/"), ("get", "/api/v1/nodes/"),
    ("get", "/api/v1/showback/"),
])
def test_the_documented_503_body_is_the_answer_given(fleet, alice, method, path) -> None:
    schema = _schema(alice)
    content = schema["paths"][path][method]["responses"]["503"]["content"]["application/json"]["schema"]
    component = schema["components"]["schemas"][content["$ref"].rsplit("/", 1)[-1]]

    answer = database_unavailable(OperationalError("connection refused"), None)
    body = json.loads(answer.content)

    assert set(body) <= set(component["properties"]), (sorted(body), sorted(component["properties"]))
    assert {"detail", "code", "retry_after"} <= set(component.get("required", [])), component
    assert component["properties"]["retry_after"]["type"] == "integer"
    assert answer["Retry-After"] == str(body["retry_after"])
