"""`GET jobs/?node=h100-1`: the jobs holding GPUs on a node now, as `squeue -w h100-1` (or
`kubectl get pods --field-selector spec.nodeName=…`) lists them: what a drain will wait for.

Found by QA as a platform engineer: no API filter or `qm` flag said which jobs run on a node
(only the node's web page did); `?node=` was refused as an unknown parameter."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"


def _on(job: Job, *nodes: Node, live: bool = True, first: int = 0) -> None:
    now = timezone.now()
    generation = Allocation.objects.count() + 1  # generations are unique fleet-wide
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=now, started_at=now)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=first + i,
                                                        live=live) for node in nodes for i in range(2))


def _ids(r: Any) -> list[int]:
    assert r.status_code == 200, r.content[:300]
    return sorted(j["id"] for j in r.json()["results"])


def test_node_lists_the_jobs_holding_its_gpus_now(fleet, alice, admin) -> None:
    one, two = fleet.nodes[1], fleet.nodes[2]
    gang = f.make_job(fleet.ml, name="gang", gpus=4, state=JobState.RUNNING)
    _on(gang, one, two)
    here = f.make_job(fleet.ml, name="here", gpus=2, state=JobState.PREEMPTING)
    _on(here, one, first=2)
    gone = f.make_job(fleet.ml, name="gone", gpus=2, state=JobState.SUCCEEDED)
    _on(gone, one, live=False)
    theirs = f.make_job(fleet.vision, name="theirs", gpus=2, state=JobState.RUNNING)
    _on(theirs, fleet.nodes[3])
    f.make_job(fleet.ml, name="waiting")

    assert _ids(alice.get(J, {"node": one.name})) == sorted([gang.pk, here.pk])
    assert _ids(alice.get(J, {"node": two.name})) == [gang.pk]
    assert _ids(alice.get(J, {"node": fleet.nodes[3].name})) == []  # another team's job: not hers to see
    assert _ids(admin.get(J, {"node": fleet.nodes[3].name})) == [theirs.pk]
    unknown = alice.get(J, {"node": "no-such-node"})  # a typo is refused, not an empty list
    assert unknown.status_code == 400 and unknown.json()["errors"] == {"node": ["no node named 'no-such-node'"]}
    # with the other filters, each job once (the gang holds 4 GPU rows on two nodes)
    r = alice.get(J, {"node": one.name, "state": ["running", "preempting"], "ordering": "-gpus"})
    assert [j["name"] for j in r.json()["results"]] == ["gang", "here"] and r.json()["count"] == 2


def test_node_filter_is_in_the_schema(admin) -> None:
    schema = admin.get("/api/schema/", {"format": "json"}).json()
    names = [p["name"] for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"]]
    assert "node" in names
