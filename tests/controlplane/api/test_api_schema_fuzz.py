"""Schemathesis against the live schema: every operation, a bounded number of generated requests
each, every request sent as each of four roles; no server error and no response the schema does
not describe (status code, content type, body, headers).

The schema is the same for every role (drf-spectacular serves it whole), so the requests are
generated once per operation and each is sent four times, once per role: generating them took
as long as sending them, and four runs of the same derandomized generation drew the same requests.

The schema is fetched from the running application (/api/schema/?format=json, as a client
would) and the requests go through the same WSGI application in-process, inside the test's
database transaction. The node-agent endpoints are left out: no user role reaches them (their
own tests cover agents).
"""

from __future__ import annotations

from typing import Any

import hypothesis
import pytest
import schemathesis
import schemathesis.checks
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase

from controlplane.wsgi import application
from tests.controlplane import factories as f

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

MAX_EXAMPLES = 20
ROLES = ("owner", "other_team", "finance", "admin")
CHECKS = [
    getattr(schemathesis.checks, name)
    for name in (
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
    )
]
AGENT_PREFIX = "/api/v1/agent/"
# Logging out revokes the token the run sends, so every later operation would answer 401: it is
# exercised by its own tests (test_api_logout.py, test_qm_logout.py) instead.
LOGOUT_PATH = "/api/v1/auth/logout/"


@pytest.fixture
def keep_test_connection() -> Any:
    """The WSGI handler closes old connections around each request; the test's own transaction
    must survive it, as Django's test client arranges for itself."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _fuzz_operation(operation: Any, headers_by_role: dict[str, dict[str, str]]) -> None:
    @hypothesis.given(case=operation.as_strategy())
    @hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case: Any) -> None:
        for role, headers in headers_by_role.items():
            response = case.call(headers=headers)
            try:
                case.validate_response(response, checks=CHECKS, headers=headers)
            # schemathesis reports its findings as a FailureGroup, a BaseExceptionGroup
            except (Exception, BaseExceptionGroup) as exc:
                raise AssertionError(f"as {role}: {exc}") from exc

    run()


def test_generated_requests_find_no_server_error_and_no_schema_violation(fleet, keep_test_connection) -> None:
    f.make_job(fleet.ml, name="seeded", submitter=fleet.users["owner"], pending_code="QuotaExceeded")
    headers_by_role = {role: {"Authorization": f"Token {f.token_for(fleet.users[role])}"} for role in ROLES}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, headers=headers_by_role["owner"])

    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path.startswith(AGENT_PREFIX) or operation.path == LOGOUT_PATH:
            continue
        operations += 1
        try:
            _fuzz_operation(operation, headers_by_role)
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc)[:2000]}")

    assert operations >= 40
    assert not failures, "\n\n".join(failures)
