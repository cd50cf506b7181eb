"""`qm drain NODE --reason "…"` (and `qm nodes cordon NODE --reason`) records why, as Slurm's
`Reason=`; `qm nodes` lists it in the node's state while it stays out of service, as `sinfo -R`
does. A reason with an action that takes none is refused before anything is sent."""

from __future__ import annotations

from controlplane.choices import NodeState
from controlplane.models import Node


def _row(out: str, name: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(f"{name} "))


def test_qm_drain_with_a_reason_and_qm_nodes_lists_it(qm, fleet) -> None:
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    r = qm("drain", "h100-2", "--reason", "XID 79 on GPU 3")

    assert r.code == 0, r.err
    assert r.out.startswith("h100-2: ready → draining (XID 79 on GPU 3): no new work goes there; nothing runs there")
    assert "draining: XID 79 on GPU 3" in _row(qm("nodes").out, "h100-2")
    r = qm("nodes", "cordon", "h100-3", "--reason", "fan swap")
    assert r.code == 0 and "cordoned: fan swap" in _row(qm("nodes").out, "h100-3")

    r = qm("nodes", "uncordon", "h100-3", "--reason", "fixed")
    assert r.code == 2 and "--reason goes with cordon or drain, not uncordon" in r.err
    assert Node.objects.get(name="h100-3").state == NodeState.CORDONED
    assert qm("uncordon", "h100-3").code == 0
    assert "fan swap" not in _row(qm("nodes").out, "h100-3")


def test_an_away_node_keeps_its_reason_in_qm_nodes(qm, fleet) -> None:
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0
    assert qm("drain", "h100-2", "--reason", "PSU fault").code == 0
    Node.objects.filter(name="h100-2").update(state=NodeState.QUARANTINED)

    assert "quarantined (returns cordoned: PSU fault)" in _row(qm("nodes").out, "h100-2")
