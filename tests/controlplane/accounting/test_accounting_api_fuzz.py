"""Schemathesis on the two accounting endpoints, for every role that reaches them: generated
query strings (windows, months, groupings, formats, buckets) never cause a server error or a
response the published schema does not describe."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import hypothesis
import pytest
import schemathesis
import schemathesis.checks
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.utils import timezone
from hypothesis import HealthCheck, Phase

from controlplane.services import accounting
from controlplane.wsgi import application
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
PATHS = ("/api/v1/showback/", "/api/v1/metrics/utilization/")
CHECKS = [getattr(schemathesis.checks, name) for name in (
    "not_a_server_error", "status_code_conformance", "content_type_conformance", "response_schema_conformance",
)]


@pytest.fixture
def keep_test_connection() -> Any:
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.mark.parametrize("role", ["owner", "finance", "admin"])
def test_generated_queries_find_no_server_error(fleet: Fleet, keep_test_connection: Any, role: str) -> None:
    now = timezone.now()
    job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(hours=1))
    hold(job, [(fleet.nodes[1], 8)], now - timedelta(hours=1))
    accounting.catch_up(now)
    headers = {"Authorization": f"Token {f.token_for(fleet.users[role])}"}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, headers=headers)
    checked, failures = 0, []
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path not in PATHS:
            continue
        checked += 1

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(max_examples=40, deadline=None, database=None, derandomize=True,
                             phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
        def run(case: Any) -> None:
            response = case.call(headers=headers)
            case.validate_response(response, checks=CHECKS, headers=headers)

        try:
            run()
        except Exception as exc:  # every operation's failure, reported together
            failures.append(f"{operation.path}: {str(exc)[:2000]}")
    assert checked == len(PATHS)
    assert not failures, "\n\n".join(failures)
