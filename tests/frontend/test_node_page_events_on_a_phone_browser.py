"""In Chromium, on a phone (400 px wide): a node's page shows each event's time, what happened
and what it said without scrolling sideways. Its five columns made a table twice the box's
width: the time held whole took half the screen, Said and By sat off screen to the right, and
Said, squeezed to its longest word, made each row several lines tall (a node's 50 events took
4,000 px; found walking the demo as an operator, 7 Dec). On a phone the table keeps When, What
and Said, the time breaking between its date and its clock and the kind after its dot
("allocation." / "released"); the reason code and the actor come back on a wider screen (and
are in the API's events)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import Node
from controlplane.services import nodes
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)
from tests.frontend.test_times_and_nodes_break_whole_browser import LINES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MEASURE = """() => {
  const box = document.querySelector('#node-status-heading ~ .table-scroll table.events').parentElement;
  const right = box.getBoundingClientRect().right;
  const heads = [...box.querySelectorAll('thead th')].filter(th => th.offsetParent !== null)
    .map(th => th.textContent.trim());
  const said = [...box.querySelectorAll('tbody td:nth-child(4)')].map(td => td.getBoundingClientRect().right <= right + 0.5);
  return {scroll: box.scrollWidth, client: box.clientWidth, heads, said};
}"""


@pytest.mark.parametrize("width, heads", [
    (400, ["When (UTC)", "What", "Said"]),
    (1280, ["When (UTC)", "What", "Reason", "Said", "By"]),
])
def test_a_nodes_events_are_read_without_scrolling_sideways(session: Any, width: int, heads: list[str]) -> None:  # noqa: F811
    node = Node.objects.get(name="h100-03")
    admin = user("admin")
    nodes.cordon(node, admin, reason="PSU fault, ticket 4411")
    nodes.uncordon(Node.objects.get(pk=node.pk), admin)
    nodes.drain(Node.objects.get(pk=node.pk), admin, reason="XID 79 on GPU 3")
    tab = session("admin")
    tab.page.set_viewport_size({"width": width, "height": 900})
    tab.open(f"/nodes/{node.name}/")

    seen = tab.page.evaluate(MEASURE)
    times = tab.page.evaluate(LINES, "table.events tbody td:first-child")
    tab.screenshot(f"node-events-{width}")

    assert seen["heads"] == heads
    assert len(seen["said"]) >= 3 and all(seen["said"]), seen
    assert seen["scroll"] <= seen["client"], seen
    assert not [lines for lines in times if any(line.endswith(("-", ":")) for line in lines[:-1])], times
    assert tab.errors == []
