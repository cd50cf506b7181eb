"""In Chromium, on a node's page: an admin cancels a maintenance window with its button and the
page's list shows it cancelled at once (it stayed "upcoming" until a reload: the node's live
JSON did not carry the list); a cancel the API refuses shows the API's words and the window as it
now stands; a window scheduled meanwhile appears with the next refresh."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.models import MaintenanceWindow, Node
from controlplane.services import maintenance
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_cancel_on_the_node_page_updates_its_window_list(session: Any) -> None:  # noqa: F811
    node = Node.objects.order_by("name").first()
    now = timezone.now()
    root = user("admin")
    first = maintenance.create(root, nodes=[node.name], start_at=now + timedelta(hours=2), duration_s=3600,
                               reason="firmware upgrade")
    second = maintenance.create(root, nodes=[node.name], start_at=now + timedelta(hours=4), duration_s=3600,
                                reason="cabling")
    admin = session("admin")
    admin.open(f"/nodes/{node.name}/")
    page = admin.page
    row = page.locator(f'#node-maintenance [data-maintenance-window="{first.pk}"]')
    expect(row).to_have_attribute("data-state", "upcoming")

    admin.act(row.locator('button[data-window-action="cancel"]'))

    expect(page.locator("#action-result")).to_have_text(f"Maintenance window {first.pk} cancelled.")
    expect(row).to_have_attribute("data-state", "cancelled")
    expect(row.locator(".badge")).to_have_text("cancelled")
    expect(row.locator('button[data-window-action="cancel"]')).to_have_count(0)
    assert MaintenanceWindow.objects.get(pk=first.pk).cancelled_at is not None

    # Ended meanwhile (as if the page had stayed open past its end): the API refuses the cancel,
    # the page says why in the API's words, and the list shows the window ended.
    MaintenanceWindow.objects.filter(pk=second.pk).update(start_at=now - timedelta(hours=2),
                                                          end_at=now - timedelta(hours=1))
    other = page.locator(f'#node-maintenance [data-maintenance-window="{second.pk}"]')
    admin.act(other.locator('button[data-window-action="cancel"]'), status=409)
    refusal = page.locator("#action-result")
    expect(refusal).to_contain_text(f"maintenance window {second.pk} ended at ")
    expect(refusal).to_contain_text("it is history and cannot be cancelled")
    expect(refusal).to_have_class("notice error")
    expect(other).to_have_attribute("data-state", "ended")
    admin.expect_refusal(f"/api/v1/maintenance-windows/{second.pk}/cancel/", 409)

    # A window scheduled elsewhere (the CLI, another admin) appears with the next refresh.
    third = maintenance.create(root, nodes=[node.name], start_at=now + timedelta(hours=6), duration_s=3600,
                               reason="BIOS")
    page.evaluate("QM.poll()")  # (its promise awaited: the page is refreshed when it returns)
    expect(page.locator(f'#node-maintenance [data-maintenance-window="{third.pk}"]')).to_contain_text("BIOS")
