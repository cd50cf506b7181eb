"""Every endpoint × every role: anonymous, a member of the owning team, a member of another
team, finance, admin, and a node agent presenting its node token."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.choices import NodeState
from controlplane.models import Job, Node, Quota
from tests.controlplane import factories as f
from tests.controlplane.built_once import Shared, built_once
from tests.controlplane.fleet_fixture import AGENT_TOKEN, ROLES, Fleet, build_fleet, client_for

pytestmark = pytest.mark.django_db

#            anonymous, owner, other_team, finance, admin, agent
READ_ALL = (401, 200, 200, 200, 200, 401)
READ_OWN = (401, 200, 404, 404, 200, 401)  # a job of another team is not found, not forbidden
READ_TEAM = (401, 200, 404, 200, 200, 401)  # team-scoped rows: finance reads every team
ADMIN_WRITE_CREATE = (401, 403, 403, 403, 201, 401)
ADMIN_WRITE = (401, 403, 403, 403, 200, 401)
ADMIN_DELETE = (401, 403, 403, 403, 204, 401)
SUBMIT = (401, 201, 400, 403, 201, 401)  # other team: "no team named 'ml' that you may submit for"
ACT_OWN = (401, 200, 404, 403, 200, 401)  # finance is refused before the job is looked up

J = "/api/v1"
MATRIX: list[tuple[str, str, str, dict[str, Any] | None, tuple[int, ...]]] = [
    ("auth_token", "post", f"{J}/auth/token/", {"username": "alice", "password": "alice"}, (200,) * 6),
    ("auth_me", "get", f"{J}/auth/me/", None, READ_ALL),
    ("auth_logout", "post", f"{J}/auth/logout/", None, (401, 204, 204, 204, 204, 401)),
    ("jobs_list", "get", f"{J}/jobs/", None, READ_ALL),
    ("jobs_submit", "post", f"{J}/jobs/", {"name": "m", "gpus": 1, "team": "ml"}, SUBMIT),
    ("job_detail", "get", f"{J}/jobs/{{job}}/", None, READ_OWN),
    ("job_events", "get", f"{J}/jobs/{{job}}/events/", None, READ_OWN),
    ("job_explain", "get", f"{J}/jobs/{{job}}/explain/", None, READ_OWN),
    ("job_cancel", "post", f"{J}/jobs/{{job}}/cancel/", None, ACT_OWN),
    ("job_change", "patch", f"{J}/jobs/{{job}}/", {"name": "renamed"}, ACT_OWN),
    ("job_hold", "post", f"{J}/jobs/{{job}}/hold/", None, ACT_OWN),
    ("job_array_submit", "post", f"{J}/job-arrays/", {"name": "s", "gpus": 1, "team": "ml", "array": "0-3"}, SUBMIT),
    ("job_array_detail", "get", f"{J}/job-arrays/{{array}}/", None, READ_OWN),
    ("teams_list", "get", f"{J}/teams/", None, READ_ALL),
    ("team_detail", "get", f"{J}/teams/{{team}}/", None, READ_TEAM),
    ("team_create", "post", f"{J}/teams/", {"name": "new-team"}, ADMIN_WRITE_CREATE),
    ("team_update", "patch", f"{J}/teams/{{team}}/", {"description": "changed"}, ADMIN_WRITE),
    ("team_delete", "delete", f"{J}/teams/{{empty_team}}/", None, ADMIN_DELETE),
    ("projects_list", "get", f"{J}/projects/", None, READ_ALL),
    ("project_detail", "get", f"{J}/projects/{{project}}/", None, READ_TEAM),
    ("project_create", "post", f"{J}/projects/", {"team": "ml", "name": "vlm"}, ADMIN_WRITE_CREATE),
    ("cohorts_list", "get", f"{J}/cohorts/", None, READ_ALL),
    ("cohort_create", "post", f"{J}/cohorts/", {"name": "other"}, ADMIN_WRITE_CREATE),
    ("quotas_list", "get", f"{J}/quotas/", None, READ_ALL),
    ("quota_detail", "get", f"{J}/quotas/{{quota}}/", None, READ_TEAM),
    ("quota_update", "patch", f"{J}/quotas/{{quota}}/", {"nominal_gpus": 24}, ADMIN_WRITE),
    ("quota_create", "post", f"{J}/quotas/", {"team": "ml", "gpu_type": "A100-40GB", "nominal_gpus": 8},
     ADMIN_WRITE_CREATE),
    ("priority_classes_list", "get", f"{J}/priority-classes/", None, READ_ALL),
    ("priority_class_create", "post", f"{J}/priority-classes/", {"name": "batch", "value": 10}, ADMIN_WRITE_CREATE),
    ("gpu_types_list", "get", f"{J}/gpu-types/", None, READ_ALL),
    ("gpu_type_create", "post", f"{J}/gpu-types/", {"name": "B200", "memory_gb": 192}, ADMIN_WRITE_CREATE),
    ("price_rates_list", "get", f"{J}/price-rates/", None, READ_ALL),
    ("price_rate_create", "post", f"{J}/price-rates/",
     {"gpu_type": "A100-40GB", "capacity_tier": "spot", "usd_per_gpu_hour": "0.9", "effective_from": "2026-02-01T00:00:00Z"},
     ADMIN_WRITE_CREATE),
    ("nodes_list", "get", f"{J}/nodes/", None, READ_ALL),
    ("node_detail", "get", f"{J}/nodes/{{node}}/", None, READ_ALL),
    ("node_create", "post", f"{J}/nodes/",
     {"name": "h100-9", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96, "memory_gb": 1024,
      "leaf_switch": "leaf-b", "spine": "spine-1"}, ADMIN_WRITE_CREATE),
    ("node_cordon", "post", f"{J}/nodes/{{node}}/cordon/", None, ADMIN_WRITE),
    ("node_drain", "post", f"{J}/nodes/{{node}}/drain/", None, ADMIN_WRITE),
    ("node_uncordon", "post", f"{J}/nodes/{{cordoned_node}}/uncordon/", None, ADMIN_WRITE),
    ("events_list", "get", f"{J}/events/", None, READ_ALL),
    ("metrics_queue", "get", f"{J}/metrics/queue/", None, READ_ALL),
    ("metrics_fragmentation", "get", f"{J}/metrics/fragmentation/", None, READ_ALL),
    ("schema", "get", "/api/schema/?format=json", None, READ_ALL),
    ("swagger_ui", "get", "/api/docs/", None, READ_ALL),
    ("redoc", "get", "/api/redoc/", None, READ_ALL),
    ("healthz", "get", "/healthz", None, (200,) * 6),
]


# Every test of the module stands on one build of the fleet (tests/controlplane/built_once.py).
SHARED = Shared()


@pytest.fixture(scope="module")
def _fleet_once(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Fleet]:
    """The fleet, built once for the module's 282 tests instead of for each (the file took 13.0 s
    on a quiet host, 11.5 s so; `objects`, which the other tests must not see, is still made for
    each case). Each test runs in a savepoint of this build, rolled back after it: what a test
    adds, changes or deletes (its jobs, a cordon, alice made inactive) is gone for the next."""
    yield from built_once(django_db_blocker, build_fleet, SHARED)


@pytest.fixture(autouse=True)
def _shared_rows_only_on_their_tests(request: pytest.FixtureRequest) -> None:
    SHARED.only_for(request, "fleet")


@pytest.fixture
def fleet(_fleet_once: Fleet, db: None) -> Fleet:
    """The shared fleet, copied for each test as Django's setUpTestData copies its attributes:
    test_inactive_user_token_is_refused changes alice's instance, which the next test must not get."""
    return copy.deepcopy(_fleet_once)


@pytest.fixture
def objects(fleet: Fleet) -> dict[str, Any]:
    job = f.make_job(fleet.ml, name="owned", submitter=fleet.users["owner"])
    array_id = uuid.uuid4()
    f.make_job(fleet.ml, name="task", array_id=array_id, array_index=0)
    cordoned = Node.objects.get(name="h100-3")
    cordoned.state = NodeState.CORDONED
    cordoned.save()
    return {
        "job": job.pk, "array": array_id, "team": fleet.ml.pk, "empty_team": f.make_team("empty").pk,
        "project": fleet.llm.pk, "quota": Quota.objects.get(team=fleet.ml).pk,
        "node": Node.objects.get(name="h100-1").pk, "cordoned_node": cordoned.pk,
    }


CASES = [
    pytest.param(method, url, body, role, expected[i], id=f"{name}-{role}")
    for name, method, url, body, expected in MATRIX
    for i, role in enumerate(ROLES)
]


@pytest.mark.parametrize("method,url,body,role,expected", CASES)
def test_endpoint_answers_role_as_expected(fleet, objects, method, url, body, role, expected) -> None:
    client: APIClient = client_for(fleet, role)

    response = getattr(client, method)(url.format(**objects), body, format="json" if body is not None else None)

    assert response.status_code == expected, (response.status_code, getattr(response, "data", response.content[:300]))


def test_agent_token_sent_as_bearer_is_refused_too(fleet) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {AGENT_TOKEN}")

    assert client.get(f"{J}/jobs/").status_code == 401
    assert client.post(f"{J}/jobs/", {"name": "x", "gpus": 1}, format="json").status_code == 401


def test_member_list_shows_only_own_team_jobs(fleet, clients) -> None:
    f.make_job(fleet.ml, name="mine")
    f.make_job(fleet.vision, name="theirs")

    names = [j["name"] for j in clients["owner"].get(f"{J}/jobs/").json()["results"]]

    assert names == ["mine"]
    assert clients["finance"].get(f"{J}/jobs/").json()["count"] == 0
    assert clients["admin"].get(f"{J}/jobs/").json()["count"] == 2


def test_member_sees_other_teams_only_as_counts_in_queue_metrics(fleet, clients) -> None:
    f.make_job(fleet.vision, name="theirs", gpus=4)

    body = clients["owner"].get(f"{J}/metrics/queue/").json()

    assert body["pending_jobs"] == 1 and body["pending_gpus"] == 4
    assert "theirs" not in str(body)


def test_inactive_user_token_is_refused(fleet) -> None:
    client = client_for(fleet, "owner")
    fleet.users["owner"].is_active = False
    fleet.users["owner"].save()

    assert client.get(f"{J}/jobs/").status_code == 401


def test_deleting_a_gpu_type_in_use_is_a_409_not_a_500(fleet, admin) -> None:
    r = admin.delete(f"{J}/gpu-types/{fleet.h100.pk}/")

    assert r.status_code == 409
    assert "Still in use" in r.json()["detail"]


def test_cancelled_job_cannot_be_cancelled_again(fleet, alice) -> None:
    job = f.make_job(fleet.ml)
    assert alice.post(f"{J}/jobs/{job.pk}/cancel/").status_code == 200

    r = alice.post(f"{J}/jobs/{job.pk}/cancel/")

    assert r.status_code == 409 and "only pending or running" in r.json()["detail"]
    assert Job.objects.get(pk=job.pk).state == "cancelled"
