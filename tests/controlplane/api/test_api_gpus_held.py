"""`gpus_held`: the GPUs a job holds now (its live allocations), beside `gpus`, the size it asked.

Found by QA: an elastic job asking 8 (4–16) grown to 16 or shrunk to 4 still showed 8 in the
API, `qm` and the job pages, while `metrics/queue/` counted the GPUs it held."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"
_generation = iter(range(1, 10_000))


def hold(job: Job, placement: list[tuple[Node, int]], state: str = AllocationState.ACTIVE, live: bool = True) -> None:
    allocation = Allocation.objects.create(
        job=job, generation=next(_generation), epoch=1, created_at=timezone.now(), state=state
    )
    AllocationGpu.objects.bulk_create(
        AllocationGpu(allocation=allocation, node=node, gpu_index=i, live=live) for node, n in placement for i in range(n)
    )


@pytest.fixture
def jobs(fleet) -> dict[str, Job]:
    n = fleet.nodes
    grown = f.make_job(fleet.ml, gpus=8, min_gpus=4, max_gpus=16, state=JobState.RUNNING)
    hold(grown, [(n[0], 8), (n[1], 8)])
    shrunk = f.make_job(fleet.ml, gpus=8, min_gpus=4, max_gpus=16, state=JobState.RUNNING)
    # Its first allocation (8) was released when it shrank; the second holds 4.
    hold(shrunk, [(n[2], 8)], state=AllocationState.RELEASED, live=False)
    hold(shrunk, [(n[2], 4)])
    rigid = f.make_job(fleet.ml, gpus=2, state=JobState.RUNNING)
    hold(rigid, [(n[3], 2)])
    stopping = f.make_job(fleet.ml, gpus=3, state=JobState.PREEMPTING)
    hold(stopping, [(n[4], 3)], state=AllocationState.RELEASING)
    pending = f.make_job(fleet.ml, gpus=8, min_gpus=4, max_gpus=16)
    done = f.make_job(fleet.ml, gpus=4, state=JobState.SUCCEEDED)
    hold(done, [(n[4], 4)], state=AllocationState.RELEASED, live=False)
    return {"grown": grown, "shrunk": shrunk, "rigid": rigid, "stopping": stopping, "pending": pending, "done": done}


EXPECTED = {"grown": (8, 16), "shrunk": (8, 4), "rigid": (2, 2), "stopping": (3, 3), "pending": (8, 0), "done": (4, 0)}


def test_list_shows_the_gpus_each_job_holds_beside_the_gpus_it_asked(alice, jobs) -> None:
    body = alice.get(f"{J}/jobs/", {"state": [s for s in JobState.values], "limit": 100}).json()
    by_id = {row["id"]: (row["gpus"], row["gpus_held"]) for row in body["results"]}
    assert {name: by_id[job.pk] for name, job in jobs.items()} == EXPECTED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_detail_shows_the_gpus_the_job_holds(alice, jobs, name) -> None:
    row = alice.get(f"{J}/jobs/{jobs[name].pk}/").json()
    assert (row["gpus"], row["gpus_held"]) == EXPECTED[name]


def test_gpus_held_is_read_only(alice, jobs) -> None:
    r = alice.post(f"{J}/jobs/", {"name": "x", "gpus": 1, "gpus_held": 4}, format="json")
    assert r.status_code == 400 and "gpus_held" in r.json()["errors"]


def test_a_fresh_submission_holds_nothing(alice, fleet) -> None:
    r = alice.post(f"{J}/jobs/", {"name": "fresh", "gpus": 2}, format="json")
    assert r.status_code == 201 and r.json()["gpus_held"] == 0


def test_the_list_counts_held_gpus_without_a_query_per_row(alice, fleet, jobs) -> None:
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert alice.get(f"{J}/jobs/", {"state": "running"}).status_code == 200
        return len(captured)

    few = queries()
    for i in range(6):
        job = f.make_job(fleet.ml, gpus=1, state=JobState.RUNNING)
        allocation = Allocation.objects.create(job=job, generation=next(_generation), epoch=1, created_at=timezone.now())
        AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[5], gpu_index=i)
    assert queries() == few
