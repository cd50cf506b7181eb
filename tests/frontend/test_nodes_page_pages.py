"""The Nodes page lists a page of nodes at a time, as the jobs and history pages list jobs.

The page wrote every node of the fleet: 1,250 nodes were 1 MB of HTML and ~100 ms a read, and
grew with the fleet (bench/scale_audit.py; docs/benchmarks.md). It now lists `PAGE_SIZE` nodes
(by pool, leaf switch and name) with links to the neighbouring pages, under the API's node
filters kept from page to page; each pool's figures and the chart stay the whole fleet's; its
live update re-reads the page shown; and its queries do not grow with the fleet."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from controlplane.models import GpuType, Node
from frontend.views import nodes as nodes_view
from tests.frontend.test_operator_nodes_page_retired import _pool_text

pytestmark = pytest.mark.django_db


def _more_nodes(count: int, pool: str = "big") -> None:
    """`count` ready 8-GPU nodes of a pool of their own, 20 to a leaf switch."""
    gpu_type = GpuType.objects.get(name="H100-80GB")
    Node.objects.bulk_create([
        Node(name=f"{pool}-{i:04d}", pool=pool, gpu_type=gpu_type, gpu_count=8, cpus=96, memory_gb=1024,
             leaf_switch=f"{pool}-leaf-{i // 20:02d}", spine="spine-9")
        for i in range(count)
    ])


def _listed(page: str) -> list[str]:
    """The nodes of the page's pool tables, in order (not the retired section's)."""
    tables = page.split('class="panel retired-nodes"')[0]
    return re.findall(r'<tr data-node="([^"]+)">', tables)


def test_a_fleet_larger_than_a_page_shows_page_one_with_a_link_to_page_two(
    client_for: Callable[[str], Client],
) -> None:
    _more_nodes(nodes_view.PAGE_SIZE + 30)
    fleet = list(Node.objects.order_by("pool", "leaf_switch", "name").values_list("name", flat=True))
    assert len(fleet) > nodes_view.PAGE_SIZE  # the test's premise: 146 nodes, two pages
    admin = client_for("admin")

    first = admin.get("/nodes/")
    page = first.content.decode()
    assert first.status_code == 200
    assert _listed(page) == fleet[:nodes_view.PAGE_SIZE]
    assert f"Nodes 1–{nodes_view.PAGE_SIZE} of {len(fleet)}, page 1 of 2." in html.unescape(page)
    link = re.search(r'<nav class="pages" aria-label="Pages of this list">.*?<a href="([^"]+)">next →</a>', page, re.S)
    assert link and html.unescape(link.group(1)) == "?page=2"
    assert "← previous" not in page.split('<nav class="pages" aria-label="Pages of this list">')[1]

    second = admin.get("/nodes/" + html.unescape(link.group(1))).content.decode()
    assert _listed(second) == fleet[nodes_view.PAGE_SIZE:]
    assert '<a href="?page=1">← previous</a>' in second and "next →" not in second
    # Every pool's figures are the whole pool's on either page, as the API's fragmentation says.
    api = {p["pool"]: p for p in admin.get("/api/v1/metrics/fragmentation/").json()["pools"]}
    for shown in (page, second):
        for pool, figures in api.items():
            text = _pool_text(shown, pool)
            assert f"of {figures['total_gpus']} GPUs in use" in text, text
            assert f"{figures['free_gpus']} free on ready nodes" in text, text
    # The chart counts every node's GPUs, whatever the page.
    for shown in (admin.get("/ui/nodes.json").json(), admin.get("/ui/nodes.json?page=2").json()):
        bars = shown["charts"]["node_states"]["figure"]["data"]
        assert sum(sum(bar["y"]) for bar in bars) == sum(Node.objects.values_list("gpu_count", flat=True))
    # A pool split over the pages says where the rest of its nodes are.
    assert re.search(r'data-pool-pages="big">This page lists \d+ of its 130 nodes; pages <a href="\?page=1">1</a>'
                     r'–<a href="\?page=2">2</a>', second)


def test_the_live_update_refreshes_the_page_shown_with_its_filters(client_for: Callable[[str], Client]) -> None:
    _more_nodes(nodes_view.PAGE_SIZE + 30)
    admin = client_for("admin")

    page = admin.get("/nodes/", {"pool": "big", "page": "2"})
    live = re.search(r'data-live-url="([^"]+)"', page.content.decode())
    assert live and html.unescape(live.group(1)) == "/ui/nodes.json?pool=big&page=2"
    update = admin.get(html.unescape(live.group(1))).json()["html"]["nodes-table"]
    wanted = list(Node.objects.filter(pool="big").order_by("leaf_switch", "name").values_list("name", flat=True))
    assert _listed(update) == _listed(page.content.decode()) == wanted[nodes_view.PAGE_SIZE:]
    # The filter is kept in the links to the other pages.
    assert '<a href="?pool=big&page=1">← previous</a>' in html.unescape(update)
    assert "matching these filters (of 146 in the fleet), page 2 of 2." in html.unescape(update)


def test_a_filter_the_page_does_not_take_is_refused_naming_it(client_for: Callable[[str], Client]) -> None:
    alice = client_for("alice")

    response = alice.get("/nodes/", {"state": "sleeping"})
    text = html.unescape(response.content.decode())
    assert response.status_code == 400
    assert '<li data-error-for="state"><code>state</code>: \'sleeping\' is not a valid choice' in text
    assert "data-node=" not in text
    unknown = alice.get("/ui/nodes.json", {"colour": "red"})
    assert unknown.status_code == 400 and list(unknown.json()["errors"]) == ["colour"]
    cordoned = alice.get("/nodes/", {"state": "cordoned"}).content.decode()
    assert _listed(cordoned) == [] and "No node matches these filters (of 16 in the fleet)." in cordoned


def test_the_pages_queries_do_not_grow_with_the_fleet(client_for: Callable[[str], Client]) -> None:
    admin = client_for("admin")

    def queries(url: str) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin.get(url).status_code == 200
        return len(captured)

    urls = ("/nodes/", "/ui/nodes.json", "/nodes/?page=2", "/nodes/?pool=h100&state=ready")
    small = {url: queries(url) for url in urls}
    _more_nodes(3 * nodes_view.PAGE_SIZE)
    large = {url: queries(url) for url in urls}

    assert small == large
    assert len(_listed(admin.get("/nodes/?page=2").content.decode())) == nodes_view.PAGE_SIZE
