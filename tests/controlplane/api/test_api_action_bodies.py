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


# A body that is JSON but no object (`[]`, `null`, `false`, `0`, `""`) read as no body, since
# `not request.data` is true of each: `POST jobs/5/hold/ []` held the job and `POST jobs/5/cancel/
# false` cancelled it, where docs/api.md lists "a body that is not an object" among the 400s.
# No body and `{}` still act.
FALSY_BODIES = ["[]", "null", "false", "0", '""']


@pytest.mark.parametrize("body", FALSY_BODIES)
@pytest.mark.parametrize("action", ["hold", "cancel", "requeue"])
def test_a_job_action_whose_body_is_not_an_object_is_refused_and_does_nothing(fleet, alice, action, body) -> None:
    job = f.make_job(fleet.ml)

    r = alice.post(f"{J}/jobs/{job.pk}/{action}/", body, content_type="application/json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert "send no body" in r.json()["detail"], r.json()
    job.refresh_from_db()
    assert job.state == JobState.PENDING and not job.hold
    assert not Event.objects.filter(job=job).exclude(kind="job.submitted").exists()


@pytest.mark.parametrize("body", FALSY_BODIES)
@pytest.mark.parametrize("action", ["cordon", "uncordon"])
def test_a_node_action_whose_body_is_not_an_object_is_refused_and_does_nothing(fleet, clients, action,
                                                                               body) -> None:
    node = fleet.nodes[1]

    r = clients["admin"].post(f"{J}/nodes/{node.pk}/{action}/", body, content_type="application/json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert "send no body" in r.json()["detail"], r.json()
    node.refresh_from_db()
    assert node.state == NodeState.READY and not Event.objects.filter(node=node, kind="node.state").exists()


def test_an_action_with_no_body_at_all_still_acts(fleet, alice) -> None:
    job = f.make_job(fleet.ml)

    assert alice.post(f"{J}/jobs/{job.pk}/hold/").status_code == 200
    assert alice.post(f"{J}/jobs/{job.pk}/release/", {}, format="json").status_code == 200
