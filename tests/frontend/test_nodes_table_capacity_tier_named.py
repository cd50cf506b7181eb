"""The Nodes table names its Spot / Reserved / On-demand column "Capacity tier", as the node's own
page (Inventory) and the docs do. It read "Tier", beside pages whose tiers are allocated, active
and productive ("Utilization in three tiers"): an operator read "Tier: Spot" as one of those."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def test_the_nodes_table_calls_its_spot_reserved_on_demand_column_capacity_tier(client_for) -> None:
    page = client_for("admin").get("/nodes/").content.decode()

    heads = re.findall(r'<th scope="col"[^>]*>([^<]*)</th>', page.split('data-live-html="nodes-table"', 1)[1])
    assert "Capacity tier" in heads and "Tier" not in heads
    assert "Spot" in page and "Reserved" in page
    node = client_for("admin").get("/nodes/h100-01/").content.decode()
    assert "Capacity tier" in node
