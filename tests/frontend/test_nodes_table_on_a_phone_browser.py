"""In Chromium, on a phone (400 px wide): the Nodes page keeps each node's state and an admin's
cordon and drain buttons on the screen, and a node's name whole. Its seven columns made a table
wider than the box: a node's name broke at its hyphen ("a100-" / "01"), the GPU type at its own
("A100-" / "40GB"), and State's right part, Heartbeat and the actions sat off screen to the right
with nothing to say they were there (found walking the demo as an operator, 7 Dec). On a phone
the table keeps the node, GPUs in use, state, heartbeat and actions; each node's GPUs and
capacity tier are on its page (Inventory) and come back on a wider screen."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import Node
from controlplane.services import nodes
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)
from tests.frontend.test_times_and_nodes_break_whole_browser import LINES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each table's scroll box, and each row's State and Actions cells' right edges against the box's.
MEASURE = """() => [...document.querySelectorAll('section.pool .table-scroll')].map(box => {
  const right = box.getBoundingClientRect().right;
  const heads = [...box.querySelectorAll('thead th')].filter(th => th.offsetParent !== null)
    .map(th => th.textContent.trim());
  const inside = [...box.querySelectorAll('tbody tr')].map(tr =>
    [...tr.querySelectorAll('td.node-state, td.actions')].every(cell => cell.getBoundingClientRect().right <= right + 0.5));
  return {scroll: box.scrollWidth, client: box.clientWidth, heads, inside};
})"""


@pytest.mark.parametrize("width, heads", [
    (400, ["Node", "In use", "State", "Heartbeat", "Actions"]),
    (1280, ["Node", "GPUs", "In use", "Capacity tier", "State", "Heartbeat", "Actions"]),
])
def test_each_nodes_state_and_actions_are_on_screen(session: Any, width: int, heads: list[str]) -> None:  # noqa: F811
    admin = user("admin")
    submit(user("alice"), SubmitRequest(name="pretrain", gpus=4))
    nodes.cordon(Node.objects.get(name="a100-02"), admin, reason="PSU fault, ticket 4411")
    nodes.drain(Node.objects.get(name="h100-07"), admin, reason="XID 79 on GPU 3")
    tab = session("admin")
    tab.page.set_viewport_size({"width": width, "height": 900})
    tab.open("/nodes/")

    seen = tab.page.evaluate(MEASURE)
    names = tab.page.evaluate(LINES, "table.nodes tbody th a")
    types = tab.page.evaluate(LINES, "table.nodes tbody td:nth-child(2)")
    tab.screenshot(f"nodes-table-{width}")

    assert len(seen) == 4  # a100's one leaf switch, h100's three
    for table in seen:
        assert table["heads"] == heads
        assert table["inside"] and all(table["inside"]), table
        assert table["scroll"] <= table["client"], table
    assert len(names) == 16 and all(len(lines) == 1 for lines in names), names
    assert not [lines for lines in types if any(line.endswith("-") for line in lines[:-1])], types
    assert tab.errors == []
