"""`qm nodes` of a fleet past 1,000 nodes listed the API's first page and said to "filter with the
API (nodes/?pool=…, ?state=…) for the rest": an operator of a large fleet could not list it from
qm at all. It now reads every page."""

from __future__ import annotations

import pytest

from controlplane.models import Node

pytestmark = pytest.mark.slow


def test_qm_nodes_lists_every_node_past_the_apis_page(qm, fleet) -> None:  # noqa: ANN001
    Node.objects.bulk_create([
        Node(name=f"gpu-{i:04d}", gpu_type=fleet.h100, pool="big", gpu_count=8, cpus=96, memory_gb=1024,
             leaf_switch="leaf-z", spine="spine-9") for i in range(1000)])
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    table = qm("nodes")
    as_json = qm("nodes", "--json").json()

    assert table.code == 0, table.err
    names = [line.split()[0] for line in table.out.splitlines()[1:] if line.startswith(("gpu-", "h100-", "a100-"))]
    assert len(names) == 1006 and len(set(names)) == 1006, f"{len(names)} of 1006 nodes listed"
    assert "filter with the API" not in table.out
    assert as_json["count"] == 1006 and len(as_json["results"]) == 1006
