"""The actions (a node's cordon, drain and uncordon; a job's cancel) take no fields, and dropped
any they were sent: `POST nodes/1/cordon/ {"reason": "bad DIMM"}` answered 200, and the reason
was nowhere (the node.state event says only who cordoned it). Like every other body's unknown
field, it is now refused with a 400 naming it, and nothing happens; an empty body or `{}` (what
the pages send) still acts. A cordon or drain takes a `reason` since 2 Dec (Slurm's `Reason=`:
test_node_cordon_reason.py); any other field is refused."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState, NodeState
from controlplane.models import Event, Job, Node
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_node_action_with_a_field_is_refused_naming_it(fleet, clients) -> None:
    admin, node = clients["admin"], fleet.nodes[1]

    r = admin.post(f"{J}/nodes/{node.pk}/cordon/", {"why": "bad DIMM"}, format="json")

    assert r.status_code == 400, r.content
    assert "why" in r.json()["errors"] and "why" in r.json()["detail"]
    node.refresh_from_db()
    assert node.state == NodeState.READY and not Event.objects.filter(node=node, kind="node.state").exists()
    assert admin.post(f"{J}/nodes/{node.pk}/cordon/", {}, format="json").status_code == 200
    assert admin.post(f"{J}/nodes/{node.pk}/uncordon/").status_code == 200
    assert Node.objects.get(pk=node.pk).state == NodeState.READY


def test_a_cancel_with_a_field_is_refused_naming_it(fleet, alice) -> None:
    job = f.make_job(fleet.ml)

    r = alice.post(f"{J}/jobs/{job.pk}/cancel/", {"reason": "wrong config", "force": True}, format="json")

    assert r.status_code == 400, r.content
    assert set(r.json()["errors"]) == {"reason", "force"}
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING
    assert alice.post(f"{J}/jobs/{job.pk}/cancel/", {}, format="json").status_code == 200
