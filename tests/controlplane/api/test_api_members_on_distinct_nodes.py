"""`members_on_distinct_nodes`: a job asks that no two members of its gang share a node (Slurm's
--ntasks-per-node=1 with --gpus-per-node, a Kubernetes pod anti-affinity). The submit stores and
echoes it, a PATCH of a waiting job changes it, the cycle's snapshot hands it to the engine, and
the engine then puts each member on a node of its own. A value that is no boolean, or a shape it
says nothing of (one member, no member size, same_node), is refused naming the field; so is a
gang with more members than the fleet has capable nodes. Without it, members are packed."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Job
from controlplane.services import cycle
from controlplane.services.jobs import SubmitRequest
from controlplane.services.snapshot import read_snapshot
from tests.controlplane.fleet_fixture import Fleet

JOBS = "/api/v1/jobs/"
H100 = ["H100-80GB"]


def _submit(alice: APIClient, **fields: Any) -> Any:
    return alice.post(JOBS, {"name": "spread", "gpu_types": H100, **fields}, format="json")


@pytest.mark.django_db
def test_submit_stores_and_echoes_members_on_distinct_nodes(fleet: Fleet, alice: APIClient) -> None:
    r = _submit(alice, gpus=8, gpus_per_node=4, members_on_distinct_nodes=True)

    assert r.status_code == 201, r.json()
    assert r.json()["members_on_distinct_nodes"] is True
    assert Job.objects.get(pk=r.json()["id"]).members_on_distinct_nodes is True
    assert alice.get(f"{JOBS}{r.json()['id']}/").json()["members_on_distinct_nodes"] is True
    packed = _submit(alice, gpus=8, gpus_per_node=4)
    assert packed.json()["members_on_distinct_nodes"] is False


@pytest.mark.django_db
def test_a_value_that_is_no_boolean_is_refused_naming_the_field(fleet: Fleet, alice: APIClient) -> None:
    before = Job.objects.count()

    r = _submit(alice, gpus=8, gpus_per_node=4, members_on_distinct_nodes="sometimes")

    assert r.status_code == 400
    assert set(r.json()["errors"]) == {"members_on_distinct_nodes"}
    assert Job.objects.count() == before


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("shape", "words"),
    [
        pytest.param({"gpus": 8, "topology": "same_node"},
                     "a same_node job puts all its GPUs on one node; members on distinct nodes asks the opposite",
                     id="same-node"),
        pytest.param({"gpus": 4, "gpus_per_node": 4},
                     "gpus 4 with gpus_per_node 4 is a single member, on one node; members on distinct nodes "
                     "needs at least two (gpus more than gpus_per_node)", id="one-member"),
        pytest.param({"gpus": 16},
                     "give gpus_per_node, the GPUs of each member: without it a job of at least one node's GPUs "
                     "takes whole nodes and a smaller one runs on one node", id="no-member-size"),
        pytest.param({"gpus": 8, "roles": [{"name": "learner", "count": 1, "gpus_per_member": 8}]},
                     "a gang of one member has no other member to keep off its node", id="one-role-member"),
    ],
)
def test_a_shape_it_says_nothing_of_is_refused_naming_the_field(
    fleet: Fleet, alice: APIClient, shape: dict[str, Any], words: str,
) -> None:
    before = Job.objects.count()

    r = _submit(alice, members_on_distinct_nodes=True, **shape)

    assert r.status_code == 400, r.json()
    assert r.json()["errors"] == {"members_on_distinct_nodes": [words]}
    assert Job.objects.count() == before
    # the same shape without the option is taken
    assert _submit(alice, **shape).status_code == 201


@pytest.mark.django_db
def test_an_elastic_job_that_grows_past_one_member_may_ask_it(fleet: Fleet, alice: APIClient) -> None:
    r = _submit(alice, gpus=4, gpus_per_node=4, min_gpus=4, max_gpus=12, members_on_distinct_nodes=True)

    assert r.status_code == 201, r.json()


@pytest.mark.django_db
def test_a_heterogeneous_gang_of_several_members_may_ask_it(fleet: Fleet, alice: APIClient) -> None:
    roles = [{"name": "learner", "count": 1, "gpus_per_member": 4}, {"name": "rollout", "count": 2, "gpus_per_member": 2}]

    r = _submit(alice, gpus=8, roles=roles, members_on_distinct_nodes=True)

    assert r.status_code == 201, r.json()
    assert r.json()["members_on_distinct_nodes"] is True


@pytest.mark.django_db
def test_more_members_than_capable_nodes_can_never_run_and_is_refused_on_the_field(
    fleet: Fleet, alice: APIClient,
) -> None:
    # four H100 nodes: five members of 4 GPUs fit them packed, not one a node
    r = _submit(alice, gpus=20, gpus_per_node=4, members_on_distinct_nodes=True)

    assert r.status_code == 400
    assert r.json()["errors"] == {"members_on_distinct_nodes": [
        "asks 5 distinct nodes with 4 GPUs each, its members on distinct nodes; the fleet has 4 capable nodes"]}
    assert _submit(alice, gpus=20, gpus_per_node=4).status_code == 201


@pytest.mark.django_db
def test_a_waiting_job_changes_it_judged_as_a_submit(fleet: Fleet, alice: APIClient) -> None:
    job = _submit(alice, gpus=8, gpus_per_node=4).json()["id"]

    on = alice.patch(f"{JOBS}{job}/", {"members_on_distinct_nodes": True}, format="json")
    assert on.status_code == 200, on.json()
    assert Job.objects.get(pk=job).members_on_distinct_nodes is True

    refused = alice.patch(f"{JOBS}{job}/", {"gpus": 4}, format="json")
    assert refused.status_code == 400
    assert set(refused.json()["errors"]) == {"members_on_distinct_nodes"}
    assert Job.objects.get(pk=job).gpus == 8


@pytest.mark.django_db
def test_the_cycle_puts_each_member_on_a_node_of_its_own(fleet: Fleet, alice: APIClient) -> None:
    spread = _submit(alice, gpus=8, gpus_per_node=4, members_on_distinct_nodes=True).json()["id"]
    specs = {s.id: s for s in read_snapshot(timezone.now(), 1).snapshot.pending}
    assert specs[str(spread)].members_on_distinct_nodes is True

    cycle.run_cycle("worker-1")

    assert Job.objects.get(pk=spread).state == JobState.RUNNING
    gpus = AllocationGpu.objects.filter(live=True, allocation__job_id=spread)
    per_node: dict[str, int] = {}
    for name in gpus.values_list("node__name", flat=True):
        per_node[name] = per_node.get(name, 0) + 1
    assert sorted(per_node.values()) == [4, 4], per_node


@pytest.mark.django_db
def test_without_it_the_cycle_packs_two_members_on_one_node(fleet: Fleet, alice: APIClient) -> None:
    packed = _submit(alice, gpus=8, gpus_per_node=4).json()["id"]

    cycle.run_cycle("worker-1")

    nodes = set(AllocationGpu.objects.filter(live=True, allocation__job_id=packed).values_list("node__name", flat=True))
    assert len(nodes) == 1


def test_a_request_without_it_keeps_the_idempotency_fingerprint_it_had_before_the_option() -> None:
    """A retry sent across the upgrade (same Idempotency-Key, same body) is still a retry, not a
    reuse of the key for another request: the digest of a packed gang is what it was before the
    option existed (the value below is SubmitRequest.fingerprint() on 1d5664be, before it)."""
    packed = SubmitRequest("train", 16, gpus_per_node=4)
    assert packed.fingerprint() == "1374fec306dae8743204606d6d636754a3698e24d3109179688341538205993c"
    assert SubmitRequest("train", 16, gpus_per_node=4, members_on_distinct_nodes=True).fingerprint() \
        != packed.fingerprint()
