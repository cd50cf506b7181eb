"""In Chromium: an admin sees a scheduled maintenance window on the Nodes page, schedules
another with the page's form (a refusal shown next to its field first), and cancels one with its
button; a member sees the windows and no form. Screenshot: test-artifacts/screenshots/."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.models import MaintenanceWindow, Node
from controlplane.services import maintenance
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_admin_sees_schedules_and_cancels_maintenance_windows_on_the_nodes_page(session: Any) -> None:  # noqa: F811
    first, second = Node.objects.order_by("name")[:2]
    window = maintenance.create(user("admin"), nodes=[first.name], start_at=timezone.now() + timedelta(hours=2),
                                duration_s=4 * 3600, reason="firmware upgrade")
    admin = session("admin")
    admin.open("/nodes/")
    page = admin.page

    row = page.locator(f'[data-maintenance-window="{window.pk}"]')
    expect(row).to_contain_text("upcoming")
    expect(row).to_contain_text(first.name)
    expect(row).to_contain_text("firmware upgrade")
    expect(row.locator(".window-affected")).to_have_text("none")
    admin.screenshot("nodes-maintenance-windows")

    # A refusal goes next to its field, and nothing is written.
    page.fill('#maintenance-form [data-field="nodes"]', f"{second.name},no-such-node")
    start = (timezone.now() + timedelta(hours=3)).strftime("%Y-%m-%dT%H:%M")
    page.fill('#maintenance-form [data-field="start_at"]', start)
    page.fill('#maintenance-form [data-field="duration_s"]', "2")
    page.fill('#maintenance-form [data-field="reason"]', "cabling")
    page.click("#maintenance-form button[type=submit]")
    expect(page.locator('#maintenance-form [data-error-for="nodes"]')).to_contain_text("no node named 'no-such-node'")
    admin.expect_refusal("/api/v1/maintenance-windows/", 400)
    assert MaintenanceWindow.objects.count() == 1

    # A length too long is refused by the window's rule, in days (until 7 Dec a bound of
    # 2147483647 s, said in hours under the hours field: "… (597000 hours).").
    page.fill('#maintenance-form [data-field="nodes"]', second.name)
    page.fill('#maintenance-form [data-field="duration_s"]', "100000000")
    page.click("#maintenance-form button[type=submit]")
    expect(page.locator('#maintenance-form [data-error-for="duration_s"]')).to_contain_text(
        "4166666 d 16 h long: a window lasts at most 14 d")
    admin.expect_refusal("/api/v1/maintenance-windows/", 400)
    assert MaintenanceWindow.objects.count() == 1

    page.fill('#maintenance-form [data-field="duration_s"]', "2")
    page.click("#maintenance-form button[type=submit]")
    expect(page.locator("#maintenance-form [data-verdict]")).to_contain_text(
        f"scheduled on {second.name}. No running job will still hold GPUs when it begins.", timeout=LIVE_TIMEOUT_MS)
    added = MaintenanceWindow.objects.exclude(pk=window.pk).get()
    assert added.reason == "cabling" and added.end_at - added.start_at == timedelta(hours=2)
    assert added.start_at.strftime("%Y-%m-%dT%H:%M") == start  # typed in UTC
    expect(page.locator(f'[data-maintenance-window="{added.pk}"]')).to_contain_text("cabling",
                                                                                     timeout=LIVE_TIMEOUT_MS)

    page.locator(f'[data-maintenance-window="{window.pk}"] button[data-window-action="cancel"]').click()
    expect(page.locator("#action-result")).to_have_text(f"Maintenance window {window.pk} cancelled.",
                                                        timeout=LIVE_TIMEOUT_MS)
    expect(page.locator(f'[data-maintenance-window="{window.pk}"]')).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    assert MaintenanceWindow.objects.get(pk=window.pk).cancelled_at is not None

    alice = session("alice")
    alice.open("/nodes/")
    expect(alice.page.locator(f'[data-maintenance-window="{added.pk}"]')).to_contain_text("cabling")
    expect(alice.page.locator("#maintenance-form")).to_have_count(0)
    expect(alice.page.locator('[data-window-action="cancel"]')).to_have_count(0)
