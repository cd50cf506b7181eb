"""Each overview tile that links to a page links to the rows it counts: the tile's number is the
number of rows on the page it opens. "Jobs waiting" and "Jobs running" count every team's jobs,
so they link to the Jobs page (under the states they count) for admins only, whose Jobs page lists
every team's; a member's would list their team's alone, and finance has none.

Until 7 Dec "Nodes not answering" (3: two quarantined, one suspect) linked to the unfiltered Nodes
page, its 16 nodes, where the reader had to find the three among them. It links to the Nodes page
under `?state=` for exactly the states the tile counts (overview.SILENT_STATES, one home), and
that page's State filter says those states chosen."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from controlplane.choices import JobState, NodeState
from controlplane.models import Job, Node
from controlplane.services.cycle import run_cycle
from frontend.views.overview import SILENT_STATES

#: A tile with a link: its label's link and its figure (the first `value` after it).
TILE = re.compile(r'<div class="tile"[^>]*>.*?<a href="(?P<href>[^"]+)">(?P<label>[^<]+)</a>.*?'
                  r'<span class="value"[^>]*>(?P<value>[^<]+)</span>', re.S)
ROW = {"/nodes/": re.compile(r'<tr data-node="'), "/jobs/": re.compile(r'<tr data-job="')}


def _tiles(html: str) -> list[tuple[str, str, int]]:
    return [(m["label"], unescape(m["href"]), int(m["value"].replace(",", ""))) for m in TILE.finditer(html)]


def _rows(client: Any, href: str) -> int:
    page = client.get(href)
    assert page.status_code == 200, href
    html = page.content.decode()
    assert "page=2" not in html, f"{href}: more than one page"  # (a small fleet: every row on the first)
    return len(ROW[href.split("?")[0]].findall(html))


def _fleet_with_silent_nodes() -> None:
    Node.objects.filter(name__in=["h100-01", "h100-02"]).update(state=NodeState.QUARANTINED)
    Node.objects.filter(name="a100-01").update(state=NodeState.SUSPECT)
    Node.objects.filter(name="a100-03").update(state=NodeState.DOWN)
    Node.objects.filter(name="a100-02").update(state=NodeState.CORDONED)  # an operator's, not silence


def test_each_tile_number_is_the_number_of_rows_on_the_page_it_links_to(client_for: Any, submit_as: Any) -> None:
    _fleet_with_silent_nodes()
    for who, gpus in [("alice", 8), ("alice", 16), ("bob", 8), ("bob", 64), ("alice", 96)]:
        submit_as(who, name=f"{who}-{gpus}", gpus=gpus, gpus_per_node=8)
    run_cycle("test")
    assert Job.objects.filter(state=JobState.RUNNING).exists() and Job.objects.filter(state=JobState.PENDING).exists()
    # The job tiles count every team's jobs: only an admin's Jobs page lists them all.
    linked = {"admin": ["Jobs waiting", "Jobs running", "Nodes not answering"],
              "alice": ["Nodes not answering"], "finn": ["Nodes not answering"]}
    for who, labels in linked.items():
        client = client_for(who)
        tiles = _tiles(client.get("/").content.decode())
        assert [label for label, _, _ in tiles] == labels, (who, tiles)
        for label, href, value in tiles:
            assert value > 0, (who, label)
            assert _rows(client, href) == value, f"{who}: tile {label} says {value}, {href} lists {_rows(client, href)}"


def test_the_not_answering_link_asks_for_the_states_the_tile_counts_and_the_filter_says_them(client_for: Any) -> None:
    _fleet_with_silent_nodes()
    admin = client_for("admin")
    (href,) = [href for label, href, _ in _tiles(admin.get("/").content.decode()) if label == "Nodes not answering"]
    assert sorted(re.findall(r"state=(\w+)", href)) == sorted(str(s) for s in SILENT_STATES)
    page = admin.get(href).content.decode()
    checked = re.findall(r'<input type="checkbox" name="state" value="(\w+)" checked>', page)
    assert sorted(checked) == sorted(str(s) for s in SILENT_STATES)
    assert sorted(re.findall(r'<tr data-node="([^"]+)"', page)) == ["a100-01", "a100-03", "h100-01", "h100-02"]
