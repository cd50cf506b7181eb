"""In Chromium, on a tablet (768 and 820 px): no Quartermaster list in the admin makes its page
scroll sideways. The node list's and the maintenance windows' action bars were as wide as their
longest action's name ("Retire selected nodes: out of the fleet for good (refused while jobs run
there)", "Cancel selected windows: …"): a 566 px select in a 556 px box pushed the page to
865 px and 880 px, and the whole page, navigation and all, slid sideways (found walking the
admin at a tablet's width, 7 Dec). A list wider than its box scrolls inside it, as Django's
admin has it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.services import maintenance
from tests.frontend.test_admin_lists_fit_browser import LISTS
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MEASURE = """() => {
  const select = document.querySelector('#changelist-form select[name=action]');
  const box = document.querySelector('#changelist-form');
  return {page: document.documentElement.scrollWidth,
          select: select && box ? select.getBoundingClientRect().right <= box.getBoundingClientRect().right + 0.5 : true};
}"""


@pytest.mark.parametrize("width", [768, 820])
def test_no_admin_list_scrolls_its_page_sideways_on_a_tablet(session: Any, width: int) -> None:  # noqa: F811
    # a window, so its list shows its action bar (Django's admin shows none over an empty list)
    maintenance.create(user("admin"), nodes=["h100-01"], start_at=timezone.now() + timedelta(hours=2),
                       duration_s=3600, reason="firmware upgrade")
    admin = session("admin")
    admin.page.set_viewport_size({"width": width, "height": 1000})
    seen = {}
    for name in LISTS:
        admin.page.goto(f"{admin.base}/admin/{name}/")
        seen[name] = admin.page.evaluate(MEASURE)
    admin.page.goto(f"{admin.base}/admin/controlplane/node/")
    admin.screenshot(f"admin-node-list-{width}px")

    wide = {name: m for name, m in seen.items() if m["page"] > width or not m["select"]}
    assert not wide, f"pages wider than the screen, or action bars past their box: {wide}"
