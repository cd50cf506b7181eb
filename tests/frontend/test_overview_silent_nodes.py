"""The overview says how many nodes do not answer (quarantined, down, suspect), with their GPUs,
and keeps it live. Found on the demo (2 Dec): after `kill -9` of an agent simulating two nodes,
both quarantined and their 16-GPU gang requeued, the overview's tiles said "GPUs allocated 80 /
144 ... 1 requeued off lost nodes" and nothing said two nodes were gone; only the grey rows of
the heat map and the Nodes page showed it."""

from __future__ import annotations

from typing import Any

from controlplane.choices import NodeState
from controlplane.models import Node


def test_the_overview_counts_the_nodes_whose_agent_does_not_answer(client_for: Any) -> None:
    admin = client_for("admin")
    calm = admin.get("/ui/overview.json").json()["text"]
    assert (calm["silent_nodes"], calm["silent_nodes_said"]) == ("0", "every node's agent answers")

    Node.objects.filter(name__in=["h100-01", "h100-02"]).update(state=NodeState.QUARANTINED)
    Node.objects.filter(name="a100-01").update(state=NodeState.SUSPECT)
    Node.objects.filter(name="a100-02").update(state=NodeState.CORDONED)  # an operator's, not silence

    text = admin.get("/ui/overview.json").json()["text"]
    assert text["silent_nodes"] == "3"
    assert text["silent_nodes_said"] == "2 quarantined (16 GPUs), 1 suspect (8 GPUs)"
    page = client_for("alice").get("/").content.decode()
    assert "Nodes not answering" in page and "2 quarantined (16 GPUs), 1 suspect (8 GPUs)" in page
    assert 'data-live="silent_nodes"' in page and 'href="/nodes/?state=quarantined&amp;state=down&amp;state=suspect"' in page


def test_an_empty_fleet_is_not_said_to_have_every_agent_answering(client_for: Any) -> None:
    Node.objects.update(state=NodeState.RETIRED)

    text = client_for("admin").get("/ui/overview.json").json()["text"]

    assert (text["silent_nodes"], text["silent_nodes_said"]) == ("0", "no node in the fleet")
