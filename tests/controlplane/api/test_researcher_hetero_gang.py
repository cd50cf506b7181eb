"""A heterogeneous gang (seed 001, 8.4.5: an RLHF pipeline's learner and its rollout workers,
admitted together or not at all) could not be submitted at all: the engine schedules `roles`
and the job row stores them, but the API refused the field ("roles: Unknown field") and no
surface wrote one. The submit now takes `roles`, checks them as it checks a job's shape (the
gpus they sum to, their GPU types, whether the fleet can ever hold each member), stores them,
and the cycle runs the gang: every member at once, each role on its own GPU type."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Event, Job
from controlplane.services.cycle import run_cycle
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

JOBS = "/api/v1/jobs/"
CHECK = "/ui/jobs/check.json"

LEARNER = {"name": "learner", "count": 1, "gpus_per_member": 8, "gpu_type": "H100-80GB"}
ROLLOUT = {"name": "rollout", "count": 4, "gpus_per_member": 1, "gpu_types": ["A100-40GB"]}
GANG = {"name": "rlhf", "gpus": 12, "roles": [LEARNER, ROLLOUT]}


@pytest.mark.django_db
def test_a_heterogeneous_gang_is_taken_stored_and_run_whole(fleet: Fleet, alice: APIClient) -> None:
    f.make_quota(fleet.ml, fleet.a100, 8)

    response = alice.post(JOBS, GANG, format="json")

    assert response.status_code == 201, response.json()
    body = response.json()
    assert [(r["name"], r["count"], r["gpus_per_member"], r["gpu_types"]) for r in body["roles"]] == [
        ("learner", 1, 8, ["H100-80GB"]), ("rollout", 4, 1, ["A100-40GB"])]
    job = Job.objects.get(pk=body["id"])
    assert job.gpus == 12 and len(job.roles) == 2
    submitted = Event.objects.get(job=job, kind="job.submitted").message
    assert "as roles learner 1×8 GPUs (of H100-80GB) + rollout 4×1 GPU (of A100-40GB)" in submitted

    run_cycle("test")

    job.refresh_from_db()
    assert job.state == JobState.RUNNING, (job.pending_code, job.pending_message)
    held = list(AllocationGpu.objects.filter(allocation__job=job, live=True).values_list("node__gpu_type__name",
                                                                                          "node__name"))
    by_type: dict[str, set[str]] = {}
    for gpu_type, node in held:
        by_type.setdefault(gpu_type, set()).add(node)
    assert sorted(t for t, _ in held).count("H100-80GB") == 8 and len(by_type["H100-80GB"]) == 1
    assert sorted(t for t, _ in held).count("A100-40GB") == 4
    assert alice.get(f"{JOBS}{job.pk}/").json()["gpus_held"] == 12


BAD_GANGS = [
    pytest.param({**GANG, "gpus": 9}, "gpus", "is not the sum of its roles' GPUs", id="gpus-not-the-sum"),
    pytest.param({**GANG, "roles": [LEARNER, {**ROLLOUT, "gpu_types": ["T4"]}]}, "roles", "unknown GPU type 'T4'",
                 id="unknown-type"),
    pytest.param({**GANG, "gpus": 20, "roles": [{**LEARNER, "gpus_per_member": 16}, ROLLOUT]}, "roles.0.gpus_per_member",
                 "role learner asks 16 GPUs on one node; the largest node has 8", id="member-too-big"),
    pytest.param({**GANG, "min_gpus": 4, "max_gpus": 12}, "min_gpus", "not elastic", id="elastic"),
    pytest.param({**GANG, "gpus_per_node": 4}, "gpus_per_node", "leave gpus_per_node out", id="gpus-per-node"),
    pytest.param({**GANG, "gpus": 16, "roles": [LEARNER, {**LEARNER, "gpu_type": "A100-40GB"}]}, "roles",
                 "'learner' given twice", id="same-name"),
    pytest.param({**GANG, "roles": [{**LEARNER, "gpus_per_membr": 8}, ROLLOUT]}, "roles.0.gpus_per_membr",
                 "Unknown field", id="typo-in-a-role"),
    pytest.param({**GANG, "roles": [{**LEARNER, "count": 0}, ROLLOUT]}, "roles.0.count", "a role has at least 1 member",
                 id="no-members"),
    pytest.param({**GANG, "roles": []}, "roles", "", id="no-roles"),
    pytest.param({**GANG, "roles": {"learner": 8}}, "roles", "", id="not-a-list"),
]


@pytest.mark.django_db
@pytest.mark.parametrize("body, field, words", BAD_GANGS)
def test_a_bad_gang_is_a_400_naming_the_field_and_writes_nothing(
    fleet: Fleet, alice: APIClient, body: dict[str, Any], field: str, words: str,
) -> None:
    response = alice.post(JOBS, body, format="json")

    assert response.status_code == 400, response.json()
    errors = response.json()["errors"]
    assert field in errors, errors
    assert words in " ".join(errors[field])
    assert not Job.objects.exists() and not f.trail().exists()


@pytest.mark.django_db
@pytest.mark.parametrize("body, field, words", [p for p in BAD_GANGS if p.id in ("gpus-not-the-sum", "member-too-big",
                                                                                 "elastic")])
def test_the_forms_live_check_refuses_the_same_gangs(fleet: Fleet, body: dict[str, Any], field: str, words: str) -> None:
    page = Client()
    page.force_login(fleet.users["owner"])
    verdict = page.post(CHECK, data=json.dumps(body), content_type="application/json").json()

    assert verdict["runs"] is False
    assert field in verdict["errors"] and words in " ".join(verdict["errors"][field])


@pytest.mark.django_db
def test_a_retried_gang_submit_returns_the_first_job(fleet: Fleet, alice: APIClient) -> None:
    first = alice.post(JOBS, GANG, format="json", HTTP_IDEMPOTENCY_KEY="rlhf-1")
    again = alice.post(JOBS, GANG, format="json", HTTP_IDEMPOTENCY_KEY="rlhf-1")
    other = alice.post(JOBS, {**GANG, "gpus": 13, "roles": [LEARNER, {**ROLLOUT, "count": 5}]}, format="json",
                       HTTP_IDEMPOTENCY_KEY="rlhf-1")

    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert other.status_code == 409
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_the_live_check_says_the_roles_it_can_run(fleet: Fleet) -> None:
    page = Client()
    page.force_login(fleet.users["owner"])
    verdict = page.post(CHECK, data=json.dumps(GANG), content_type="application/json").json()

    assert verdict["runs"] is True
    assert verdict["detail"].startswith(
        "This fleet can run 12 GPUs as roles learner 1×8 GPUs (of H100-80GB) + rollout 4×1 GPU (of A100-40GB).")


@pytest.mark.django_db
def test_the_explanation_of_a_running_gang_says_where_each_role_runs(fleet: Fleet, alice: APIClient) -> None:
    f.make_quota(fleet.ml, fleet.a100, 8)
    job_id = alice.post(JOBS, GANG, format="json").json()["id"]
    run_cycle("test")
    nodes: dict[str, set[str]] = {}
    for role, node in AllocationGpu.objects.filter(allocation__job_id=job_id, live=True).values_list("role", "node__name"):
        nodes.setdefault(role, set()).add(node)

    reason = alice.get(f"{JOBS}{job_id}/explain/").json()["reason"]

    assert reason.endswith(
        f" on 12 GPUs: learner 8 GPUs of {', '.join(sorted(nodes['learner']))}; "
        f"rollout 4 GPUs of {', '.join(sorted(nodes['rollout']))}."), reason
