"""In Chromium, on a 1,400 px desktop with the admin's navigation open: every Quartermaster list
in the Django admin fits beside its filter sidebar, every column whole, nothing hidden.

Known from the admin's walk (5 Dec): the quota list (nine columns beside the filters) was 954 px
wide in a 751 px box and scrolled sideways, its borrowing and lending limits out of sight; the
priority classes' list (1,112 in 1,021 px), the nodes' (828) and the allocations' (877) too. The
admin's headers never wrap (`white-space: nowrap`: "ABOVE NOMINAL (BORROWED)" took 170 px over a
"0"), nor do its times and related records ("2026-12-05 21:58:44 UTC", 184 px)."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import Cohort, GpuType, Quota, Team
from tests.controlplane import factories as f
from tests.frontend.test_browser_pages import browser, fill_the_fleet, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LISTS = (*(f"controlplane/{name}" for name in (
    "quota", "priorityclass", "node", "job", "allocation", "event", "team", "cohort", "pricerate", "gputype",
    "maintenancewindow", "notificationhook", "schedulerlease")), "auth/user")

# The list's box and what it holds, the page's width, and each header's and cell's right edge
# against the box's (a cell cut off at the box's edge would be information hidden).
MEASURE = """() => {
  const box = document.querySelector('#changelist .results');
  if (!box) return null;
  const right = box.getBoundingClientRect().right + 0.5;
  const cut = [...box.querySelectorAll('thead th, tbody td')]
    .filter(c => c.getBoundingClientRect().right > right)
    .map(c => c.innerText.trim());
  return {client: box.clientWidth, scroll: box.scrollWidth, page: document.documentElement.scrollWidth,
          headers: [...box.querySelectorAll('thead th')].map(th => th.innerText.replace(/\\s+/g, ' ').trim()),
          cut};
}"""


def _awkward_quotas() -> None:
    """Rows with the list's longest words: a team in no cohort ("none (no cohort)") and a quota
    lowered under what its team holds, past its borrowing limit."""
    h100 = GpuType.objects.get(name="H100-80GB")
    loner = f.make_team("recommendation-systems", cohort=None)
    f.make_quota(loner, h100, 8)
    held = Quota.objects.get(team__name="vision", gpu_type=h100)
    Quota.objects.filter(pk=held.pk).update(nominal_gpus=2, borrowing_limit=1)
    assert Cohort.objects.exists() and Team.objects.filter(cohort=None).exists()


def test_every_admin_list_fits_beside_its_filters_at_1400_px(session: Any) -> None:  # noqa: F811
    fill_the_fleet()
    _awkward_quotas()
    admin = session("admin")
    seen = {}
    for name in LISTS:
        admin.page.goto(f"{admin.base}/admin/{name}/")
        seen[name] = admin.page.evaluate(MEASURE)
        if name == "controlplane/quota":
            admin.screenshot("admin-quota-list-1400px")
    assert admin.page.evaluate("document.querySelector('#nav-sidebar').getBoundingClientRect().width") > 200

    quota = seen["controlplane/quota"]
    assert quota is not None and quota["headers"][1:] == [
        "TEAM", "COHORT", "GPU TYPE", "NOMINAL GPUS", "HELD NOW", "ABOVE NOMINAL (BORROWED)", "LENT NOW",
        "BORROWING LIMIT", "LENDING LIMIT"], quota["headers"]
    wide = {name: (m["scroll"], m["client"], m["cut"][:4]) for name, m in seen.items()
            if m is not None and (m["scroll"] > m["client"] or m["cut"] or m["page"] > 1400)}
    assert not wide, f"lists wider than their box (scroll width, box width, cells cut off): {wide}"
