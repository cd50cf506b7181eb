"""Every operation of the API's schema, as each role: anonymous, a member of the owning team, a
member of another team, finance, an admin, and a node agent presenting its node token.

test_api_roles.py holds the first table (jobs, the fleet's records, auth); this one holds every
other operation, and `test_every_operation_of_the_schema_is_in_a_table` fails when an operation
is in neither, so a new route cannot ship unjudged. A row says what each role gets: a member of
another team meets 404 for the owning team's job, array, event or webhook (its existence does not
leak), finance 403 on anything that acts on a job and 404 on what only a team reads, and only
admins change the fleet's records.
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.test.utils import override_settings
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from controlplane.choices import JobState, NodeState
from controlplane.models import (
    Cohort,
    Event,
    GpuType,
    MaintenanceWindow,
    Node,
    NotificationHook,
    PriceRate,
    Quota,
)
from controlplane.services import notifications
from tests.controlplane import factories as f
from tests.controlplane.api.test_api_roles import MATRIX as FIRST_TABLE
from tests.controlplane.built_once import Shared, built_once
from tests.controlplane.fleet_fixture import ROLES, Fleet, build_fleet, client_for
from tests.controlplane.webhook_receiver import LOOPBACK, dead_url

pytestmark = pytest.mark.django_db

#            anonymous, owner, other_team, finance, admin, agent
READ_ALL = (401, 200, 200, 200, 200, 401)
READ_OWN = (401, 200, 404, 404, 200, 401)  # another team's job, array or event: not found
ACT_OWN = (401, 200, 404, 403, 200, 401)  # finance is refused before the job is looked up
ADMIN_WRITE = (401, 403, 403, 403, 200, 401)
ADMIN_CREATE = (401, 403, 403, 403, 201, 401)
ADMIN_DELETE = (401, 403, 403, 403, 204, 401)
HOOK_OWN = (401, 200, 404, 404, 200, 401)  # a hook is its user's; admins see and change every hook
HOOK_DELETE = (401, 204, 404, 404, 204, 401)
PERSON_CREATE = (401, 201, 201, 201, 201, 401)  # a hook on one's own jobs: anyone signed in

J = "/api/v1"
NODE_BODY = {"name": "h100-1", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96,
             "memory_gb": 1024, "leaf_switch": "leaf-a", "spine": "spine-1", "capacity_tier": "on_demand",
             "simulated": False}
# A PUT replaces the whole record: its bodies give every writable field (test_api_put_replaces_whole.py).
CLASS_BODY = {"name": "spare", "value": 5, "description": "", "preemptible": True, "may_preempt_lower": True,
              "grace_period_s": 30, "min_runtime_s": 0, "preemption_budget": 3, "budget_window_s": 86400,
              "default_runtime_limit_s": 4 * 3600, "max_runtime_limit_s": 7 * 86400}
TABLE: list[tuple[str, str, str, Any, tuple[int, ...]]] = [
    # jobs: what the owning team reads and does
    ("job_logs", "get", "{J}/jobs/{job}/logs/", None, READ_OWN),
    ("job_runs", "get", "{J}/jobs/{job}/runs/", None, READ_OWN),
    ("job_release", "post", "{J}/jobs/{held}/release/", None, ACT_OWN),
    ("job_requeue", "post", "{J}/jobs/{failed}/requeue/", None, ACT_OWN),
    ("event_detail", "get", "{J}/events/{event}/", None, READ_OWN),
    ("job_array_limit", "patch", "{J}/job-arrays/{array}/", {"array_task_limit": 1}, ACT_OWN),
    ("job_array_hold", "post", "{J}/job-arrays/{array}/hold/", None, ACT_OWN),
    ("job_array_release", "post", "{J}/job-arrays/{array}/release/", None, ACT_OWN),
    ("job_array_requeue", "post", "{J}/job-arrays/{array}/requeue/", None, ACT_OWN),
    ("job_array_cancel", "post", "{J}/job-arrays/{array}/cancel/", None, ACT_OWN),
    # read by everyone signed in, each within their scope (docs/api.md, Roles)
    ("job_history_csv", "get", "{J}/jobs/history.csv", None, READ_ALL),
    ("job_history_xlsx", "get", "{J}/jobs/history.xlsx", None, READ_ALL),
    ("job_priority", "get", "{J}/jobs/priority/", None, READ_ALL),
    ("metrics_etas", "get", "{J}/metrics/etas/", None, READ_ALL),
    ("metrics_utilization", "get", "{J}/metrics/utilization/", None, READ_ALL),
    ("scheduler_policy", "get", "{J}/scheduler/policy/", None, READ_ALL),
    ("scheduler_fair_share", "get", "{J}/scheduler/fair-share/", None, READ_ALL),
    ("showback", "get", "{J}/showback/", None, READ_ALL),
    ("cohort_detail", "get", "{J}/cohorts/{cohort}/", None, READ_ALL),
    ("gpu_type_detail", "get", "{J}/gpu-types/{gpu_type}/", None, READ_ALL),
    ("price_rate_detail", "get", "{J}/price-rates/{price_rate}/", None, READ_ALL),
    ("priority_class_detail", "get", "{J}/priority-classes/{priority_class}/", None, READ_ALL),
    ("maintenance_windows_list", "get", "{J}/maintenance-windows/", None, READ_ALL),
    ("maintenance_window_detail", "get", "{J}/maintenance-windows/{window}/", None, READ_ALL),
    # the fleet's records: admins only
    ("cohort_put", "put", "{J}/cohorts/{cohort}/", {"name": "all", "description": "x"}, ADMIN_WRITE),
    ("cohort_patch", "patch", "{J}/cohorts/{cohort}/", {"description": "x"}, ADMIN_WRITE),
    ("cohort_delete", "delete", "{J}/cohorts/{spare_cohort}/", None, ADMIN_DELETE),
    ("gpu_type_put", "put", "{J}/gpu-types/{spare_gpu_type}/", {"name": "B200", "memory_gb": 180, "relative_throughput": 1.0},
     ADMIN_WRITE),
    ("gpu_type_patch", "patch", "{J}/gpu-types/{spare_gpu_type}/", {"memory_gb": 180}, ADMIN_WRITE),
    ("gpu_type_delete", "delete", "{J}/gpu-types/{spare_gpu_type}/", None, ADMIN_DELETE),
    ("price_rate_put", "put", "{J}/price-rates/{price_rate}/",
     {"gpu_type": "H100-80GB", "capacity_tier": "on_demand", "usd_per_gpu_hour": "2.6",
      "effective_from": "2026-01-01T00:00:00Z"}, ADMIN_WRITE),
    ("price_rate_patch", "patch", "{J}/price-rates/{price_rate}/", {"usd_per_gpu_hour": "2.6"}, ADMIN_WRITE),
    ("price_rate_delete", "delete", "{J}/price-rates/{price_rate}/", None, ADMIN_DELETE),
    ("priority_class_put", "put", "{J}/priority-classes/{spare_class}/", CLASS_BODY, ADMIN_WRITE),
    ("priority_class_patch", "patch", "{J}/priority-classes/{priority_class}/", {"value": 101}, ADMIN_WRITE),
    ("priority_class_delete", "delete", "{J}/priority-classes/{spare_class}/", None, ADMIN_DELETE),
    ("project_put", "put", "{J}/projects/{project}/", {"team": "ml", "name": "llm", "description": "x"}, ADMIN_WRITE),
    ("project_patch", "patch", "{J}/projects/{project}/", {"description": "x"}, ADMIN_WRITE),
    ("project_delete", "delete", "{J}/projects/{spare_project}/", None, ADMIN_DELETE),
    ("quota_put", "put", "{J}/quotas/{quota}/", {"team": "ml", "gpu_type": "H100-80GB", "nominal_gpus": 20,
                                               "borrowing_limit": None, "lending_limit": None}, ADMIN_WRITE),
    ("quota_delete", "delete", "{J}/quotas/{quota}/", None, ADMIN_DELETE),
    ("team_put", "put", "{J}/teams/{team}/", {"name": "ml", "description": "x", "cohort": "all",
                                             "default_priority_class": "research", "priority_classes": []},
     ADMIN_WRITE),
    ("node_put", "put", "{J}/nodes/{node}/", NODE_BODY, ADMIN_WRITE),
    ("node_patch", "patch", "{J}/nodes/{node}/", {"pool": "h100"}, ADMIN_WRITE),
    ("node_delete", "delete", "{J}/nodes/{spare_node}/", None, ADMIN_DELETE),
    ("node_retire", "post", "{J}/nodes/{node}/retire/", None, ADMIN_WRITE),
    ("node_return", "post", "{J}/nodes/{retired_node}/return/", None, ADMIN_WRITE),
    ("maintenance_window_create", "post", "{J}/maintenance-windows/",
     {"nodes": ["h100-2"], "start_at": "{later}", "duration_s": 3600, "reason": "firmware"}, ADMIN_CREATE),
    ("maintenance_window_patch", "patch", "{J}/maintenance-windows/{window}/", {"reason": "firmware 2"}, ADMIN_WRITE),
    ("maintenance_window_cancel", "post", "{J}/maintenance-windows/{window}/cancel/", None, ADMIN_WRITE),
    # webhooks: each user's own
    ("hooks_list", "get", "{J}/notification-hooks/", None, READ_ALL),
    ("hook_create", "post", "{J}/notification-hooks/", {"url": "{hook_url}", "events": ["failed"]}, PERSON_CREATE),
    ("hook_detail", "get", "{J}/notification-hooks/{hook}/", None, HOOK_OWN),
    ("hook_put", "put", "{J}/notification-hooks/{hook}/",
     {"url": "{hook_url}", "events": ["started"], "team": None, "active": True}, HOOK_OWN),
    ("hook_patch", "patch", "{J}/notification-hooks/{hook}/", {"active": False}, HOOK_OWN),
    ("hook_delete", "delete", "{J}/notification-hooks/{hook}/", None, HOOK_DELETE),
    ("hook_deliveries", "get", "{J}/notification-hooks/{hook}/deliveries/", None, HOOK_OWN),
    ("hook_history", "get", "{J}/notification-hooks/{hook}/history/", None, HOOK_OWN),
    ("hook_rotate_secret", "post", "{J}/notification-hooks/{hook}/rotate-secret/", None, HOOK_OWN),
    ("hook_test", "post", "{J}/notification-hooks/{hook}/test/", None, HOOK_OWN),
]


def _operation(method: str, path: str) -> tuple[str, str]:
    """(METHOD, path with every parameter written {}), the way the schema and the tables name one."""
    path = path.replace("{J}", J).split("?")[0]
    return method.upper(), re.sub(r"\{+[a-z_]+\}+", "{}", path)


def test_every_operation_of_the_schema_is_in_a_table() -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    operations = {_operation(method, path) for path, item in schema["paths"].items() for method in item}
    tabled = {_operation(method, url) for _, method, url, _, _ in [*FIRST_TABLE, *TABLE]}
    assert len(operations) > 100 and ("GET", f"{J}/jobs/{{}}/logs/") in operations  # the schema was read

    assert operations - tabled == set(), "judge these for every role (a row here or in test_api_roles.py)"


# The schema's table above comes first: the cases below share one build of the fleet and its
# records (tests/controlplane/built_once.py), and a test without them may not run beside them.
SHARED = Shared()
WEBHOOKS_ON_LOOPBACK = {"WEBHOOK_TIMEOUT_S": 0.5, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK]}


@pytest.fixture(scope="module")
def _fleet_and_records_once(django_db_setup: Any, django_db_blocker: Any) -> Iterator[tuple[Fleet, dict[str, Any]]]:
    """The fleet and the records the table's URLs name, built once for the module's 354 cases
    (built for each, they were over half the file's time: 9 s of 20 on a quiet host, 87 of 133
    under load). Each case runs in a savepoint of this build, rolled back after it, so a case that
    deletes or changes a record leaves it whole for the next: hook_delete's owner deletes the
    hook, and its admin then deletes it again (204, not 404)."""

    def build() -> tuple[Fleet, dict[str, Any]]:
        with override_settings(QM={**django_settings.QM, **WEBHOOKS_ON_LOOPBACK}):
            fleet = build_fleet()
            return fleet, _records(fleet)

    yield from built_once(django_db_blocker, build, SHARED)


@pytest.fixture(autouse=True)
def _shared_rows_only_on_their_tests(request: pytest.FixtureRequest) -> None:
    SHARED.only_for(request, "fleet")


@pytest.fixture
def fleet(_fleet_and_records_once: tuple[Fleet, dict[str, Any]], db: None) -> Fleet:
    """The shared fleet, copied for each case as Django's setUpTestData copies its attributes
    (a case that changed a row's instance in memory would otherwise hand the change on)."""
    return copy.deepcopy(_fleet_and_records_once[0])


@pytest.fixture
def objects(_fleet_and_records_once: tuple[Fleet, dict[str, Any]], settings: Any) -> dict[str, Any]:
    settings.QM = {**settings.QM, **WEBHOOKS_ON_LOOPBACK}
    return dict(_fleet_and_records_once[1])


def _records(fleet: Fleet) -> dict[str, Any]:
    alice = fleet.users["owner"]
    job = f.make_job(fleet.ml, name="owned", submitter=alice)
    held = f.make_job(fleet.ml, name="held", submitter=alice, held_at=timezone.now(), held_by=alice)
    failed = f.make_job(fleet.ml, name="failed", submitter=alice, state=JobState.FAILED,
                        finished_at=timezone.now())
    array_id = uuid.uuid4()
    f.make_job(fleet.ml, name="task", array_id=array_id, array_index=0, submitter=alice)
    event = Event.objects.create(kind="job.submitted", actor="user:alice", job=job, team=fleet.ml,
                                 created_at=timezone.now(), message="Submitted by alice")
    retired = Node.objects.get(name="a100-1")
    Node.objects.filter(pk=retired.pk).update(state=NodeState.RETIRED, retired_at=timezone.now(),
                                              unschedulable=True)
    window = MaintenanceWindow.objects.create(start_at=timezone.now() + timedelta(days=2),
                                              end_at=timezone.now() + timedelta(days=2, hours=1), reason="disks",
                                              created_at=timezone.now())
    window.nodes.set([Node.objects.get(name="h100-3")])
    url = dead_url()
    hook = NotificationHook.objects.create(user=alice, url=url, events=["failed"], secret=notifications.new_secret(),
                                           created_at=timezone.now())
    return {
        "J": J, "job": job.pk, "held": held.pk, "failed": failed.pk, "array": array_id, "event": event.pk,
        "cohort": Cohort.objects.get(name="all").pk, "spare_cohort": f.make_cohort("spare").pk,
        "gpu_type": fleet.h100.pk, "spare_gpu_type": GpuType.objects.create(name="B200", memory_gb=192).pk,
        "price_rate": PriceRate.objects.get(gpu_type=fleet.h100).pk,
        "priority_class": fleet.research.pk, "spare_class": f.make_priority_class("spare", 5).pk,
        "project": fleet.llm.pk, "spare_project": f.make_project(fleet.ml, "spare").pk,
        "quota": Quota.objects.get(team=fleet.ml).pk, "team": fleet.ml.pk,
        "node": Node.objects.get(name="h100-1").pk, "spare_node": f.make_node(fleet.a100, name="spare-0").pk,
        "retired_node": retired.pk, "window": window.pk, "hook": hook.pk, "hook_url": url,
        "later": (timezone.now() + timedelta(days=3)).isoformat().replace("+00:00", "Z"),
    }


def _filled(value: Any, objects: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return value.format(**objects)
    if isinstance(value, dict):
        return {k: _filled(v, objects) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, objects) for v in value]
    return value


CASES = [
    pytest.param(method, url, body, role, expected[i], id=f"{name}-{role}")
    for name, method, url, body, expected in TABLE
    for i, role in enumerate(ROLES)
]


@pytest.mark.parametrize("method,url,body,role,expected", CASES)
def test_operation_answers_each_role_as_its_row_says(fleet, objects, method, url, body, role, expected) -> None:
    client: APIClient = client_for(fleet, role)

    response = getattr(client, method)(_filled(url, objects), _filled(body, objects),
                                       format="json" if body is not None else None)

    assert response.status_code == expected, (response.status_code, getattr(response, "data", response.content[:300]))
