"""In Chromium, on a 1,400 px desktop: every number box of Quartermaster's admin forms shows its
whole value, up to the largest the column takes (2147483647).

Found on the admin's walk (5 Dec): the demo's production class has a maximum runtime limit of
2592000 s (30 days), and its page showed "259200" (3 days) in Django's 5em integer box, the last
digit cut off; a quota, a node's GPU count or a grace period of eight digits and more alike."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import Cohort, GpuType, Node, PriceRate, PriorityClass, Quota, Team
from tests.frontend.test_browser_pages import browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Each number box's name, its value, and whether it is cut off: as it stands, then holding the
# largest value it takes (its `max`, else ten digits).
BOXES = """() => [...document.querySelectorAll('input[type=number]')].filter(e => e.offsetParent !== null).flatMap(e => {
  const given = e.value;
  const cut = v => { e.value = v; const c = e.scrollWidth > e.clientWidth; return {name: e.name, value: v, cut: c}; };
  const out = [cut(given), cut(e.max && e.max.length <= 10 ? e.max : '2147483647')];
  e.value = given;
  return out;
})"""


def test_every_number_box_of_the_admin_shows_its_whole_value(session: Any) -> None:  # noqa: F811
    production = PriorityClass.objects.get(name="production")
    assert production.max_runtime_limit_s == 2592000  # the demo's 30 days
    pages = {
        "priorityclass": production.pk, "team": Team.objects.get(name="vision").pk,
        "quota": Quota.objects.order_by("pk").first().pk, "node": Node.objects.order_by("pk").first().pk,
        "gputype": GpuType.objects.order_by("pk").first().pk, "pricerate": PriceRate.objects.order_by("pk").first().pk,
        "cohort": Cohort.objects.order_by("pk").first().pk,
    }
    admin = session("admin")
    cut: dict[str, list[Any]] = {}
    seen = 0
    for model, pk in pages.items():
        admin.page.goto(f"{admin.base}/admin/controlplane/{model}/{pk}/change/")
        boxes = admin.page.evaluate(BOXES)
        seen += len(boxes)
        cut.update({model: [b for b in boxes if b["cut"]]} if any(b["cut"] for b in boxes) else {})
        if model == "priorityclass":
            box = admin.page.locator("#id_max_runtime_limit_s")
            assert box.input_value() == "2592000"
            box.hover()  # Chromium draws the number box's arrows on hover, inside the box
            assert box.evaluate("e => e.scrollWidth <= e.clientWidth"), "2592000 s cut off under the pointer"
            admin.screenshot("admin-priority-class-form")
    assert seen > 20
    assert not cut, f"number boxes that cut their value off: {cut}"
