"""In Chromium, on the Nodes page: an admin gives a reason with a cordon or a drain, as the API
(`{"reason": …}`) and `qm drain NODE --reason` take one, and the page shows it back on the node's
row. Until 2 Dec the page had no field for it: a node cordoned from the browser carried no reason,
and the next operator could only guess why."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.choices import NodeState
from controlplane.models import Event, Node
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_drain_from_the_nodes_page_carries_the_reason_typed_and_the_row_shows_it(session: Any) -> None:  # noqa: F811
    admin = session("admin")
    admin.open("/nodes/")
    reason = admin.page.locator("#node-action-reason")
    reason.fill("PSU fault, ticket 4411")
    row = admin.page.locator('tr[data-node="h100-03"]')

    admin.act(row.locator("[data-node-action=drain]"))

    expect(row.locator(".node-state .badge")).to_have_text("Draining")
    expect(row.locator("[data-cordon-reason]")).to_have_text("PSU fault, ticket 4411")
    node = Node.objects.get(name="h100-03")
    assert node.state == NodeState.DRAINING
    said = Event.objects.filter(node=node, kind="node.state").order_by("-id").first()
    assert said is not None and "PSU fault, ticket 4411" in said.message
    # Sent once: the box is emptied, so the next cordon is not given this node's reason unasked.
    expect(reason).to_have_value("")
    admin.act('tr[data-node="h100-04"] [data-node-action=cordon]')
    other = admin.page.locator('tr[data-node="h100-04"]')
    expect(other.locator(".node-state .badge")).to_have_text("Cordoned")
    expect(other.locator("[data-cordon-reason]")).to_have_count(0)


def test_a_reason_too_long_is_refused_in_words_and_the_node_is_left_as_it_was(session: Any) -> None:  # noqa: F811
    admin = session("admin")
    admin.open("/nodes/")
    admin.page.evaluate("document.getElementById('node-action-reason').value = 'x'.repeat(201)")
    admin.act('tr[data-node="h100-03"] [data-node-action=cordon]', status=400)
    said = admin.page.locator("#action-result")
    expect(said).to_contain_text("200")
    admin.expect_refusal("/cordon/", 400)
    assert Node.objects.get(name="h100-03").state == NodeState.READY
    # what was typed stays, to be shortened
    assert len(admin.page.locator("#node-action-reason").input_value()) == 201


def test_a_cordon_from_the_node_page_carries_the_reason_and_the_page_shows_it(session: Any) -> None:  # noqa: F811
    admin = session("admin")
    admin.open("/nodes/h100-03/")
    admin.page.locator("#node-action-reason").fill("XID 79")

    admin.act("[data-node-action=cordon]")

    expect(admin.page.locator("#node-state .badge")).to_have_text("Cordoned")
    expect(admin.page.locator("#node-cordon-reason")).to_have_text("XID 79")
    expect(admin.page.locator("#node-action-reason")).to_have_value("")
    # read again from the server, not only from the live fragment
    admin.open("/nodes/h100-03/")
    expect(admin.page.locator("#node-cordon-reason")).to_have_text("XID 79")
    admin.act("[data-node-action=uncordon]")
    expect(admin.page.locator("#node-state .badge")).to_have_text("Ready")
    expect(admin.page.locator("#node-cordon-reason")).to_have_count(0)


def test_a_member_sees_the_reason_and_no_field(session: Any) -> None:  # noqa: F811
    from controlplane.services import nodes
    from tests.frontend.test_browser_pages import user

    nodes.drain(Node.objects.get(name="h100-03"), user("admin"), "DIMM errors")
    alice = session("alice")
    alice.open("/nodes/h100-03/")
    expect(alice.page.locator("#node-cordon-reason")).to_have_text("DIMM errors")
    expect(alice.page.locator("#node-action-reason")).to_have_count(0)
    alice.open("/nodes/")
    expect(alice.page.locator('tr[data-node="h100-03"] [data-cordon-reason]')).to_have_text("DIMM errors")
    expect(alice.page.locator("#node-action-reason")).to_have_count(0)
