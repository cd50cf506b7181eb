"""In Chromium: the admin's information messages do not look like successes. Django's admin
draws an INFO message as it draws a SUCCESS one, green with a tick, and the Quartermaster admin
says much at that level: "Already there, nothing recorded: h100-03" beside "Cordon: h100-02
(ready → cordoned)", the jobs a drain leaves running, the quota list's note on "≈" shares. A
node cordoned already read as ticked off like the one just cordoned (found walking the admin,
7 Dec). An information message is drawn apart (its own colour, no tick), its words at 4.5:1 or
more, in the light and the dark theme."""

from __future__ import annotations

import re
from typing import Any

import pytest

from controlplane.models import Node
from controlplane.services import nodes
from tests.frontend.test_badge_contrast import contrast
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LOOK = """() => Object.fromEntries([...document.querySelectorAll('ul.messagelist li')].map(li => {
  const s = getComputedStyle(li);
  return [li.className, {background: s.backgroundColor, ink: s.color, tick: s.backgroundImage}];
}))"""


def _hex(rgb: str) -> str:
    r, g, b = (int(v) for v in re.findall(r"\d+", rgb)[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_information_message_is_not_drawn_as_a_success(session: Any, theme: str) -> None:  # noqa: F811
    nodes.cordon(Node.objects.get(name="h100-03"), user("admin"))
    moved, already = Node.objects.get(name="h100-02"), Node.objects.get(name="h100-03")
    admin = session("admin")
    admin.page.goto(f"{admin.base}/admin/controlplane/node/")
    admin.page.evaluate(f"localStorage.setItem('theme', '{theme}')")
    for node in (moved, already):
        admin.page.check(f'input[name="_selected_action"][value="{node.pk}"]')
    admin.page.select_option("select[name=action]", "cordon")
    admin.page.click("button[name=index]")
    admin.page.wait_for_selector("ul.messagelist li.info")

    look = admin.page.evaluate(LOOK)
    admin.screenshot(f"admin-info-message-{theme}")

    success, info = look["success"], look["info"]
    assert info["background"] != success["background"], look
    assert "icon-yes" not in info["tick"], look
    assert contrast(_hex(info["ink"]), _hex(info["background"])) >= 4.5, look
    assert "Already there, nothing recorded: h100-03" in admin.page.inner_text("ul.messagelist li.info")
