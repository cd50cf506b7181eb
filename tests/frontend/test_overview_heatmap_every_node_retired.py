"""The overview's heat map with every node retired says so, not that no node has registered.

Retired nodes are out of the fleet: the heat map draws none of them. Until 8 Dec a fleet whose
every node was retired (moved off, decommissioned) read "No node has registered yet. When node
agents register, every GPU appears here as a cell." beside a Nodes page listing them retired,
and their agents, told so, would never register again. It now says how many are retired and how
one comes back."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.models import Node
from controlplane.services import nodes


def _heatmap_empty(client: Client) -> str:
    return str(client.get("/ui/overview.json").json()["charts"]["heatmap"]["empty"])


def test_a_fleet_whose_every_node_is_retired_is_said_retired(client_for: Callable[[str], Client]) -> None:
    admin = get_user_model().objects.get(username="admin")
    fleet = list(Node.objects.all())
    for node in fleet:
        nodes.retire(node, admin)
    for who in ("admin", "alice"):
        said = _heatmap_empty(client_for(who))
        assert "registered yet" not in said
        assert f"Every node of the fleet is retired ({len(fleet)})" in said
        assert "return" in said
        page = client_for(who).get("/").content.decode()
        assert f"Every node of the fleet is retired ({len(fleet)})" in page


def test_a_fleet_never_registered_still_says_so(client_for: Callable[[str], Client]) -> None:
    Node.objects.all().delete()
    assert "No node has registered yet" in _heatmap_empty(client_for("admin"))


def test_one_node_in_service_draws_the_map(client_for: Callable[[str], Client]) -> None:
    admin = get_user_model().objects.get(username="admin")
    kept, *others = Node.objects.order_by("name")
    for node in others:
        nodes.retire(node, admin)
    assert not _heatmap_empty(client_for("admin"))
