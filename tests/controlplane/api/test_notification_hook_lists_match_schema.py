"""A hook's deliveries and history answer what the schema says: a list (the last 50 deliveries,
the last 100 changes), not a page. The schema said a page (`count`, `results`) with `limit` and
`offset`, which the endpoints refuse as parameters they do not take: a client built from the
schema read neither (found by an exploratory schemathesis run with a hook to act on; the
committed fuzz has none)."""

from __future__ import annotations

import pytest
import schemathesis
import schemathesis.checks
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from rest_framework.test import APIClient

from controlplane.wsgi import application
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db
URL = "/api/v1/notification-hooks/"
PATHS = (f"{URL}{{id}}/deliveries/", f"{URL}{{id}}/history/")


def test_deliveries_and_history_are_lists_in_the_schema_and_in_the_answer(fleet: Fleet, alice: APIClient) -> None:
    hook = alice.post(URL, {"url": "https://hooks.slack.com/services/T0/B0/x", "events": ["failed"]},
                      format="json").json()["id"]
    assert alice.patch(f"{URL}{hook}/", {"active": False}, format="json").status_code == 200
    headers = {"Authorization": f"Token {f.token_for(fleet.users['owner'])}"}
    for path in PATHS:  # the parameters the endpoints refuse are not offered
        r = alice.get(path.format(id=hook) + "?limit=5")
        assert r.status_code == 400 and "limit" in r.json()["errors"], r.content
    request_started.disconnect(close_old_connections)  # the test's transaction survives the WSGI calls
    request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, headers=headers)
        checked = []
        for result in schema.get_all_operations():
            operation = result.ok()
            if operation.path not in PATHS:
                continue
            assert [p.name for p in operation.query] == [], operation.path
            case = operation.Case(path_parameters={"id": hook})
            response = case.call(headers=headers)
            assert response.status_code == 200, response.text
            assert isinstance(response.json(), list)
            case.validate_response(response, checks=[schemathesis.checks.response_schema_conformance], headers=headers)
            checked.append(operation.path)
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    assert sorted(checked) == sorted(PATHS)
