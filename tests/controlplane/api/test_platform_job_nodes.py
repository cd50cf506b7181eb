"""A job says the nodes it holds GPUs on now (`nodes`), as `scontrol show job` says NodeList and
`kubectl get pods -o wide` NODE: in the list, the detail and the cancel answer.

Found by QA as a platform engineer: the job's JSON said how many GPUs it held (`gpus_held`) but
not where; the only machine-readable way was to read every node's jobs, and the explanation
said it in a sentence."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node, SchedulerLease
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def _on(job: Job, *nodes: Node, live: bool = True, first: int = 0) -> None:
    now = timezone.now()
    allocation = Allocation.objects.create(job=job, generation=Allocation.objects.count() + 1, epoch=1,
                                           created_at=now, started_at=now)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=first + i, live=live)
                                      for node in nodes for i in range(2))


def _by_name(r: Any) -> dict[str, Any]:
    assert r.status_code == 200, r.content[:300]
    return {j["name"]: j for j in r.json()["results"]}


def test_list_and_detail_say_the_nodes_a_job_holds_gpus_on(fleet, alice) -> None:
    gang = f.make_job(fleet.ml, name="gang", gpus=4, state=JobState.RUNNING)
    _on(gang, fleet.nodes[3], fleet.nodes[1])
    done = f.make_job(fleet.ml, name="done", gpus=2, state=JobState.SUCCEEDED)
    _on(done, fleet.nodes[2], live=False)
    f.make_job(fleet.ml, name="waiting")

    jobs = _by_name(alice.get(J))
    assert jobs["gang"]["nodes"] == [fleet.nodes[1].name, fleet.nodes[3].name]
    assert jobs["gang"]["gpus_held"] == 4
    assert jobs["done"]["nodes"] == [] and jobs["waiting"]["nodes"] == []
    assert alice.get(f"{J}{gang.pk}/").json()["nodes"] == [fleet.nodes[1].name, fleet.nodes[3].name]


def test_a_page_costs_the_same_queries_with_nodes(fleet, alice) -> None:
    for i in range(3):
        job = f.make_job(fleet.ml, name=f"r{i}", gpus=2, state=JobState.RUNNING)
        _on(job, fleet.nodes[i], first=0)
    with CaptureQueriesContext(connection) as three:
        assert alice.get(J).status_code == 200
    for i in range(3):
        job = f.make_job(fleet.ml, name=f"s{i}", gpus=2, state=JobState.RUNNING)
        _on(job, fleet.nodes[i], first=2)
    with CaptureQueriesContext(connection) as six:
        assert alice.get(J).status_code == 200
    assert len(six) == len(three)


def test_the_cancel_answer_and_a_submit_say_nodes(fleet, alice) -> None:
    SchedulerLease.objects.create(epoch=1)
    running = f.make_job(fleet.ml, name="run", gpus=2, state=JobState.RUNNING, started_at=timezone.now())
    _on(running, fleet.nodes[1])

    cancelled = alice.post(f"{J}{running.pk}/cancel/")
    submitted = alice.post(J, {"name": "new", "gpus": 1}, format="json")

    assert cancelled.status_code == 200 and cancelled.json()["job"]["nodes"] == [fleet.nodes[1].name]
    assert submitted.status_code == 201 and submitted.json()["nodes"] == []


def test_nodes_is_in_the_schema_and_refused_in_a_submit(fleet, alice, admin) -> None:
    schema = admin.get("/api/schema/", {"format": "json"}).json()
    assert "nodes" in schema["components"]["schemas"]["Job"]["properties"]
    r = alice.post(J, {"name": "x", "gpus": 1, "nodes": ["h100-1"]}, format="json")
    assert r.status_code == 400 and "nodes" in r.json()["errors"]
