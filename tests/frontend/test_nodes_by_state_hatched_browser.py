"""In Chromium: the Nodes page's *GPUs by pool and node state* bars draw the hatching of the node
states a colour-blind reader sees alike another's (`figures.NODE_STATE_PATTERNS`;
test_nodes_by_state_colour_blind.py measures which): down is hatched over its red, ready plain
beside it. Until 8 Dec both were plain, told apart by colour alone (ΔE 17.0 to a protanope)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import NodeState
from controlplane.models import Node
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: Each drawn trace's name and the fills of its bars as Chromium paints them.
FILLS = """() => {
    const plot = document.querySelector('[data-chart="node_states"] .js-plotly-plot');
    return [...plot.querySelectorAll('.trace.bars')].map(trace => ({
        name: trace.__data__[0].trace.name,
        fills: [...trace.querySelectorAll('path')].map(p => getComputedStyle(p).fill),
    }));
}"""


def test_down_is_hatched_and_ready_is_plain_as_drawn(session: Any) -> None:  # noqa: F811
    down = Node.objects.filter(state=NodeState.READY).order_by("name").first()
    assert down is not None
    Node.objects.filter(pk=down.pk).update(state=NodeState.DOWN)
    admin = session("admin")
    admin.open("/nodes/")

    drawn = {trace["name"]: trace["fills"] for trace in admin.page.evaluate(FILLS)}

    assert drawn["Down"] and all(fill.startswith("url(") for fill in drawn["Down"]), drawn
    assert drawn["Ready"] and not any(fill.startswith("url(") for fill in drawn["Ready"]), drawn
