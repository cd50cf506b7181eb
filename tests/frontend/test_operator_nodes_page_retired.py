"""Retired nodes on the nodes page: listed apart, in no pool's capacity; admins return them.

Before, a node could only be "retired" by moving it to a pool of its own: the nodes page showed
that pool with its GPUs, and the overview's heatmap kept its slots. Now a retired node is out of
every pool (its GPUs count nowhere), listed in a small collapsed section under the pools with
when it was retired, and an admin's button there returns it to service (the API's action).
Cordoned nodes offer "retire"."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.choices import NodeState
from controlplane.models import Node
from controlplane.services import nodes


def _pool_text(html: str, pool: str) -> str:
    said = re.search(rf'data-pool-fragmentation="{pool}"[^>]*>(.*?)</', html, re.S)
    assert said, pool
    return " ".join(said.group(1).split())


def test_operator_a_retired_node_is_listed_apart_and_out_of_its_pools_capacity(
    client_for: Callable[[str], Client],
) -> None:
    admin_user = get_user_model().objects.get(username="admin")
    h100 = list(Node.objects.filter(pool="h100").order_by("name"))
    gpus = sum(n.gpu_count for n in h100)
    before = _pool_text(client_for("admin").get("/nodes/").content.decode(), "h100")
    assert f"of {gpus} GPUs in use" in before  # the test's premise
    gone = h100[-1]
    nodes.retire(gone, admin_user)

    admin = client_for("admin")
    for html in (admin.get("/nodes/").content.decode(), admin.get("/ui/nodes.json").json()["html"]["nodes-table"]):
        assert f"of {gpus - gone.gpu_count} GPUs in use" in _pool_text(html, "h100")
        section = re.search(r'<section class="panel retired-nodes" data-retired-nodes="1">(.*?)</section>', html, re.S)
        assert section, "no retired section"
        body = " ".join(section.group(1).split())
        assert f"Retired: 1 node, {gone.gpu_count} GPUs" in body and "<details>" in section.group(1)
        assert f'data-node="{gone.name}"' in body and "return to service" in body
        # ... and only there: not in a pool's table.
        assert html.count(f'data-node="{gone.name}"') == 1
    assert "1 retired, listed apart" in admin.get("/nodes/").content.decode()

    member = client_for("alice").get("/nodes/").content.decode()
    assert "Retired: 1 node" in member and "return to service" not in member

    overview = client_for("admin").get("/").content.decode()
    assert gone.name not in overview


def test_operator_the_return_button_posts_the_api_action_and_cordoned_nodes_offer_retire(
    client_for: Callable[[str], Client],
) -> None:
    admin_user = get_user_model().objects.get(username="admin")
    node, cordoned = Node.objects.order_by("name")[:2]
    nodes.retire(node, admin_user)
    nodes.cordon(cordoned, admin_user)
    admin = client_for("admin")
    html = admin.get("/nodes/").content.decode()

    button = re.search(rf'data-api-post="([^"]+)" data-node-action="return" data-done="{node.name}: ', html)
    assert button, "no return button"
    retire = re.search(rf'data-api-post="(/api/v1/nodes/{cordoned.pk}/retire/)" data-node-action="retire"', html)
    assert retire, "a cordoned node offers no retire"

    assert admin.post(button.group(1), content_type="application/json").status_code == 200
    assert Node.objects.get(pk=node.pk).state == NodeState.DOWN
    assert "retired-nodes" not in admin.get("/nodes/").content.decode()


def test_operator_a_retired_nodes_own_page_says_since_when_and_offers_return(
    client_for: Callable[[str], Client],
) -> None:
    node = Node.objects.order_by("name").first()
    nodes.retire(node, get_user_model().objects.get(username="admin"))

    html = client_for("admin").get(f"/nodes/{node.name}/").content.decode()

    assert 'id="node-retired"' in html and "out of the fleet" in html
    assert f'data-api-post="/api/v1/nodes/{node.pk}/return/"' in html
