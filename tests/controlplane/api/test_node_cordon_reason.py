"""A cordon or drain takes a reason, as Slurm's `scontrol update nodename=… state=drain
reason="…"` does, and the node list gives it back while the node stays out of service (`sinfo
-R`): `cordon_reason` on GET nodes/, `qm nodes` ("draining: bad DIMM"). Before, the actions
refused any field, so an on-call operator could not say why a node was taken out, and the next
one had to find the cordon event and ask its author."""

from __future__ import annotations

import pytest

from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, Node

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _listed(admin, name: str) -> dict:  # noqa: ANN001
    [node] = admin.get(f"{J}/nodes/", {"name": name}).json()["results"]
    return node


def test_a_drain_keeps_its_reason_until_the_node_is_uncordoned(fleet, admin) -> None:
    node = fleet.nodes[2]
    assert _listed(admin, "h100-2")["cordon_reason"] is None

    r = admin.post(f"{J}/nodes/{node.pk}/drain/", {"reason": "XID 79 on GPU 3"}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["detail"].startswith("h100-2: ready → draining (XID 79 on GPU 3): no new work goes there")
    assert r.json()["cordon_reason"] == "XID 79 on GPU 3"
    event = Event.objects.get(node=node, kind=EventKind.NODE_STATE)
    assert event.data["reason"] == "XID 79 on GPU 3"
    assert event.message.startswith("h100-2: ready → draining (drain by root: XID 79 on GPU 3)")
    assert _listed(admin, "h100-2")["cordon_reason"] == "XID 79 on GPU 3"
    assert _listed(admin, "h100-1")["cordon_reason"] is None

    # A cordon of the draining node with a new reason: the newest is the node's reason.
    admin.post(f"{J}/nodes/{node.pk}/cordon/", {"reason": "waiting for the vendor"}, format="json")
    assert _listed(admin, "h100-2")["cordon_reason"] == "waiting for the vendor"
    # Already cordoned: a new reason is recorded, the state stays.
    again = admin.post(f"{J}/nodes/{node.pk}/cordon/", {"reason": "RMA 4411 opened"}, format="json").json()
    assert again["changed"] is False and again["detail"].startswith("h100-2 is cordoned already: its reason is now: "
                                                                    "RMA 4411 opened")
    assert _listed(admin, "h100-2")["cordon_reason"] == "RMA 4411 opened"
    # Without a reason a repeat records nothing and keeps the reason.
    before = Event.objects.filter(node=node).count()
    admin.post(f"{J}/nodes/{node.pk}/cordon/")
    assert Event.objects.filter(node=node).count() == before
    assert _listed(admin, "h100-2")["cordon_reason"] == "RMA 4411 opened"

    admin.post(f"{J}/nodes/{node.pk}/uncordon/")
    assert _listed(admin, "h100-2")["cordon_reason"] is None
    # A cordon without a reason reads "" (out of service, no reason given), not the old one.
    admin.post(f"{J}/nodes/{node.pk}/cordon/", {}, format="json")
    assert _listed(admin, "h100-2")["cordon_reason"] == ""


@pytest.mark.parametrize("body,field", [
    ({"reason": "two\nlines"}, "reason"),
    ({"reason": 7}, "reason"),
    ({"reason": "x" * 201}, "reason"),
    ({"reason": "ok", "force": True}, "force"),
])
def test_a_bad_reason_is_refused_naming_the_field_and_nothing_changes(fleet, admin, body, field) -> None:
    node = fleet.nodes[2]

    r = admin.post(f"{J}/nodes/{node.pk}/drain/", body, format="json")

    assert r.status_code == 400 and field in r.json()["errors"], r.json()
    assert Node.objects.get(pk=node.pk).state == NodeState.READY
    assert not Event.objects.filter(node=node).exists()


def test_uncordon_retire_and_return_take_no_reason(fleet, admin) -> None:
    node = fleet.nodes[2]
    Node.objects.filter(pk=node.pk).update(state=NodeState.CORDONED, unschedulable=True)

    for verb in ("uncordon", "retire"):
        r = admin.post(f"{J}/nodes/{node.pk}/{verb}/", {"reason": "done"}, format="json")
        assert r.status_code == 400 and "reason" in r.json()["errors"], r.json()
    assert Node.objects.get(pk=node.pk).state == NodeState.CORDONED
