"""Schemathesis against the live schema: every operation, a bounded number of generated requests
each, every request sent as each of four roles; no server error and no response the schema does
not describe (status code, content type, body, headers).

The operations are fuzzed in parts (PARTS, by the collection their path starts with), one test
file each (tests/controlplane/api/test_api_schema_fuzz_*.py), so pytest-xdist spreads them over
its workers: as one file they were one test of 8-9 minutes on the loaded two cores, the suite's
longest by far, on one worker while the others finished. An operation no part names is fuzzed
with the last part's, the rest, so a new endpoint is covered from the day it is added.

The schema is the same for every role (drf-spectacular serves it whole), so the requests are
generated once per operation and each is sent four times, once per role: generating them took
as long as sending them, and four runs of the same derandomized generation drew the same requests.

Each operation on one record is also offered the ids of records that exist (a waiting job, an
ended one, a job array, a hook, a maintenance window and the fleet's own records), beside the ids
the schema generates, which almost never name one: until 6 Dec every such request was a 404, and
a hook's deliveries and history, which answered a list where the schema said a page, and a
never-run job's empty text log, which answered no Content-Type, went unseen here. Deletions go
last, so the records they remove are there for the rest.

The schema is fetched from the running application (/api/schema/?format=json, as a client
would) and the requests go through the same WSGI application in-process, inside the test's
database transaction. The node-agent endpoints are left out: no user role reaches them (their
own tests cover agents).
"""

from __future__ import annotations

from typing import Any

import hypothesis
import hypothesis.strategies as st
import pytest
import schemathesis
import schemathesis.checks
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase

from controlplane.choices import JobState
from controlplane.models import Cohort, GpuType, Node, PriceRate, PriorityClass, Project, Quota, Team
from controlplane.wsgi import application
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, client_for

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


def _existing_records(fleet: Fleet) -> dict[str, list[Any]]:
    """Records to act on, by the collection path their operations start with: made through the
    API as their owners make them, and a job that ended, which no request makes."""
    owner, admin = client_for(fleet, "owner"), client_for(fleet, "admin")
    waiting = f.make_job(fleet.ml, name="seeded", submitter=fleet.users["owner"], pending_code="QuotaExceeded")
    ended = f.make_job(fleet.ml, name="ended", submitter=fleet.users["owner"], state=JobState.FAILED, exit_code=1)
    array = owner.post("/api/v1/job-arrays/", {"name": "sweep", "gpus": 1, "command": "python s.py", "array": "0-1"},
                       format="json")
    hook = owner.post("/api/v1/notification-hooks/", {"url": "https://hooks.slack.com/services/T0/B0/x",
                                                      "events": ["failed"]}, format="json")
    window = admin.post("/api/v1/maintenance-windows/", {"nodes": ["h100-3"], "duration_s": 3600, "reason": "firmware",
                                                         "start_at": "2099-01-01T00:00:00Z"}, format="json")
    assert (array.status_code, hook.status_code, window.status_code) == (201, 201, 201), (array.content, hook.content,
                                                                                          window.content)
    v1 = "/api/v1/"
    return {
        f"{v1}jobs/": [waiting.pk, ended.pk], f"{v1}job-arrays/": [array.json()["array_id"]],
        f"{v1}notification-hooks/": [hook.json()["id"]], f"{v1}maintenance-windows/": [window.json()["id"]],
        **{f"{v1}{path}/": list(model.objects.values_list("pk", flat=True)[:2]) for path, model in (
            ("teams", Team), ("projects", Project), ("cohorts", Cohort), ("quotas", Quota), ("gpu-types", GpuType),
            ("priority-classes", PriorityClass), ("price-rates", PriceRate), ("nodes", Node))},
    }


def _strategy(operation: Any, records: dict[str, list[Any]]) -> Any:
    """The operation's generated requests, and as many again on the records that exist."""
    generated = operation.as_strategy()
    names = [parameter.name for parameter in operation.path_parameters]
    ids = next((ids for path, ids in records.items() if operation.path.startswith(path) and operation.path != path), [])
    if len(names) != 1 or not ids:
        return generated
    return st.one_of(generated, *(operation.as_strategy(path_parameters={names[0]: i}) for i in ids))


def _fuzz_operation(operation: Any, headers_by_role: dict[str, dict[str, str]], records: dict[str, list[Any]]) -> None:
    @hypothesis.given(case=_strategy(operation, records))
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


#: The parts, by the collection paths their operations start with (a part's own test file each);
#: an operation in none of them is the rest's. Of about equal length on a 3-worker run.
PARTS: dict[str, tuple[str, ...]] = {
    "jobs": ("/api/v1/jobs/", "/api/v1/job-arrays/", "/api/v1/events/"),
    "nodes": ("/api/v1/nodes/", "/api/v1/maintenance-windows/", "/api/v1/gpu-types/"),
    "teams": ("/api/v1/teams/", "/api/v1/projects/", "/api/v1/cohorts/", "/api/v1/quotas/"),
    "prices_and_hooks": ("/api/v1/price-rates/", "/api/v1/priority-classes/", "/api/v1/notification-hooks/"),
}
REST = "rest"


def part_of(path: str) -> str:
    return next((part for part, prefixes in PARTS.items() if path.startswith(prefixes)), REST)


def fuzz_part(part: str, fleet: Fleet, settings: Any) -> int:
    """Fuzz the part's operations (every one of them, deletions last, each failure reported) and
    say how many there were."""
    assert part in PARTS or part == REST, part
    settings.QM = {**settings.QM, "WEBHOOK_TIMEOUT_S": 0.5}  # the seeded hook's test deliveries reach no one
    records = _existing_records(fleet)
    # the WSGI calls' own: the test client's requests above connect Django's handler again
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    headers_by_role = {role: {"Authorization": f"Token {f.token_for(fleet.users[role])}"} for role in ROLES}
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, headers=headers_by_role["owner"])

    failures: list[str] = []
    operations = 0
    every = sorted((result.ok() for result in schema.get_all_operations()), key=lambda op: op.method.upper() == "DELETE")
    for operation in every:
        if operation.path.startswith(AGENT_PREFIX) or operation.path == LOGOUT_PATH or part_of(operation.path) != part:
            continue
        operations += 1
        try:
            _fuzz_operation(operation, headers_by_role, records)
        except Exception as exc:  # collect every operation's failure, then report them all
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc)[:2000]}")

    assert not failures, "\n\n".join(failures)
    return operations
