"""In Chromium, on a node's own page: Retire asks what the Nodes page's button asks, that the node
leaves the fleet for good (no work, no capacity, its agent refused) until an admin returns it;
and Return asks what returning does (down until its agent registers, then cordoned). Until 7 Dec
the node's page asked only "Retire a100-04?" and "Return a100-04?", the one page where an admin
looking at one node retires it saying nothing of what follows."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from controlplane.choices import NodeState
from controlplane.models import Node
from controlplane.services import nodes
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_node_pages_retire_and_return_say_what_follows(session: Any) -> None:  # noqa: F811
    node = Node.objects.get(name="a100-04")
    nodes.cordon(node, get_user_model().objects.get(username="admin"))
    tab = session("admin")
    tab.open("/nodes/a100-04/")
    page = tab.page
    asked: list[str] = []
    page.on("dialog", lambda dialog: asked.append(dialog.message))  # the session's own handler accepts it

    tab.act('button[data-node-action="retire"]')
    expect(page.locator("#node-retired")).to_be_visible()
    assert Node.objects.get(name="a100-04").state == NodeState.RETIRED

    tab.act('button[data-node-action="return"]')
    expect(page.locator("#node-retired")).to_have_count(0)
    assert Node.objects.get(name="a100-04").state == NodeState.DOWN

    assert asked == [
        "Retire a100-04? It leaves the fleet for good: no work, no capacity, its agent refused, until an admin "
        "returns it to service.",
        "Return a100-04 to service? It is down until its agent registers, then cordoned.",
    ]
    assert tab.errors == []
