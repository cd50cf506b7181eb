"""`qm nodes retire NODE`, `qm nodes return NODE`, and `qm nodes` hiding retired nodes.

A retired node is out of the fleet: `qm nodes` lists the fleet and says how many retired nodes
it left out (`--all` lists them, with when they were retired). Retiring a node that still runs
jobs prints the API's refusal (how many, and to drain it first) and exits 1.
"""

from __future__ import annotations

import json

from django.db import transaction
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Node
from controlplane.services import reconcile, transitions
from tests.controlplane import factories as f


def _root(qm) -> None:  # noqa: ANN001
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0


def test_admin_retires_a_node_and_qm_nodes_hides_it_unless_all(qm, fleet) -> None:
    _root(qm)

    r = qm("nodes", "retire", "h100-2")

    assert r.code == 0, r.err
    assert r.out.strip().startswith("h100-2 is retired: out of the fleet (no work, no capacity, its agent refused)")
    assert "qm nodes return h100-2" in r.out
    assert Node.objects.get(name="h100-2").state == NodeState.RETIRED
    listed = qm("nodes").out
    assert "h100-2" not in listed and "h100-3" in listed
    assert "1 retired node not shown, out of the fleet: qm nodes --retired lists them (--all with the rest)" in listed
    every = qm("nodes", "--all").out
    row = next(line for line in every.splitlines() if line.startswith("h100-2 "))
    assert f"retired {timezone.now():%Y-%m-%d}" in row and "not shown" not in every and "h100-3 " in every
    only = qm("nodes", "--retired").out
    assert [line.split()[0] for line in only.splitlines()[1:]] == ["h100-2"], only
    assert f"retired {timezone.now():%Y-%m-%d}" in only and "not shown" not in only
    page = json.loads(qm("nodes", "--json").out)
    names = [n["name"] for n in page["results"]]
    assert "h100-2" not in names and len(names) == 5 and page["count"] == 5  # filtered by the server
    assert [n["name"] for n in json.loads(qm("nodes", "--retired", "--json").out)["results"]] == ["h100-2"]


def test_qm_nodes_asks_the_server_for_the_fleet_without_retired_nodes_and_their_count(qm, fleet) -> None:
    _root(qm)
    Node.objects.exclude(name="h100-0").update(state=NodeState.RETIRED, retired_at=timezone.now())

    listed = qm("nodes", "--json")
    retired = qm("nodes", "--retired")
    both = qm("nodes", "--all", "--retired")

    assert [n["name"] for n in json.loads(listed.out)["results"]] == ["h100-0"]
    assert "5 retired nodes not shown" in qm("nodes").out
    assert retired.code == 0 and len(retired.out.strip().splitlines()) == 6  # the header and five nodes
    assert both.code != 0 and "--all and --retired do not go together" in both.err


def test_admin_returns_a_retired_node_to_service(qm, fleet) -> None:
    _root(qm)
    assert qm("nodes", "retire", "h100-2").code == 0

    r = qm("nodes", "return", "h100-2")

    assert r.code == 0, r.err
    assert r.out.strip() == ("h100-2 is down: back in the fleet, until its agent registers again; it then comes back "
                             "cordoned (qm uncordon it to take work).")
    assert "h100-2" in qm("nodes").out


def test_retiring_a_node_that_runs_a_job_prints_the_refusal_and_exits_1(qm, fleet) -> None:
    node = Node.objects.get(name="h100-1")
    job = f.make_job(fleet.ml, fleet.research, name="busy", gpus=2)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=node.pk, gpu_indices=[0, 1])], lease=lease,
                             borrowed=False, at=timezone.now(), actor="test")
    _root(qm)

    r = qm("nodes", "retire", "h100-1")

    assert r.code == 1
    assert "node h100-1 still runs 1 job on 2 of its 8 GPUs" in r.err and "qm nodes drain h100-1" in r.err
    assert Node.objects.get(name="h100-1").state == NodeState.READY
    # The way it names works: drain through `qm nodes drain`, which says what it leaves running.
    assert ("h100-1: ready → draining: no new work goes there; 1 job runs there until it ends (by "
            in qm("nodes", "drain", "h100-1").out)
    drained = qm("nodes", "drain", "h100-1").out
    assert drained.startswith("h100-1 is draining already: nothing changed; 1 job runs there until it ends")
    assert f"job {job.pk} busy (2 GPUs here; its runtime limit ends " in drained
    assert drained.rstrip().endswith("it becomes cordoned once the last has ended.")


def test_qm_nodes_refuses_an_unknown_action_or_a_missing_node(qm, fleet) -> None:
    _root(qm)
    r = qm("nodes", "retrie", "h100-2")
    assert r.code == 2 and "unknown node action 'retrie'" in r.err
    r = qm("nodes", "retire")
    assert r.code == 2 and "needs a node name: qm nodes retire NODE" in r.err


def test_member_cannot_retire(alice_qm) -> None:
    r = alice_qm("nodes", "retire", "h100-2")
    assert r.code == 1 and "Only admins" in r.err
    assert Node.objects.get(name="h100-2").state == NodeState.READY
