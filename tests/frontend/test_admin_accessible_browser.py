"""In Chromium, signed in as an admin: Quartermaster's lists and change forms in the Django admin
(teams, quotas, cohorts, priority classes, price rates, nodes, jobs, events, maintenance windows,
users), the admin's index and the Scheduler policy page get the product pages' checks (tests/frontend/test_pages_accessible_browser.py, the same
audit run in the browser): every control and link named in Chromium's accessibility tree, text at
4.5:1 on its background (3:1 when large), a visible focus ring on every Tab stop and no trap, one
h1 and headings in order, every table's header cells scoped, and a navigation landmark (the
index had none until 7 Dec: Django empties its breadcrumbs, the only <nav> of a page without
the sidebar; the account's links are one now, admin/base_site.html).

What Django's own admin markup does that Quartermaster does not change (docs/dashboards.md,
Accessibility, The admin) is listed in DJANGO_OWN_TH and DJANGO_OWN_UNNAMED and left out;
everything else is reported. Before 6 Dec it reported: on a team's and a user's page every
control of the memberships' and projects' rows unnamed (user, role, name, description, Delete);
every date and time box unnamed (a price rate's effective from, a maintenance window's start and
end, a user's last login and date joined); the cohort page's members table with unscoped header
cells; the two-list node picker's "(click to clear)" at 1.70:1."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.models import (
    Cohort,
    Event,
    Job,
    MaintenanceWindow,
    Node,
    PriceRate,
    PriorityClass,
    Quota,
    Team,
)
from controlplane.services import maintenance
from tests.frontend.test_browser_pages import browser, fill_the_fleet, session, user  # noqa: F401 (fixtures)
from tests.frontend.test_pages_accessible_browser import AUDIT, _unnamed, keyboard_findings

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MODELS = {"controlplane/team": Team, "controlplane/quota": Quota, "controlplane/cohort": Cohort,
          "controlplane/priorityclass": PriorityClass, "controlplane/pricerate": PriceRate,
          "controlplane/node": Node, "controlplane/job": Job, "controlplane/event": Event,
          "controlplane/maintenancewindow": MaintenanceWindow, "auth/user": None}

# Django's own admin markup, as it comes, not Quartermaster's to change (docs/dashboards.md,
# Accessibility, "The admin"): left out of the report, each by where it is.
DJANGO_OWN_TH = ", ".join((
    "#result_list tbody th",         # a list row's first cell: Django's items_for_result writes <th> with no scope
    ".inline-group .tabular thead th",  # a tabular inline's column heads (admin/edit_inline/tabular.html)
    ".calendar th",                  # the date picker's weekday heads (calendar.js)
))
DJANGO_OWN_UNNAMED = re.compile(r'<a href="#" id="(calendar|clock)link\d+"')  # DateTimeShortcuts.js' icon links

# Header cells with no scope, Django's own left out; help texts no control is described by.
TABLES_AND_HELP = """(ownTh) => {
  const th = [...document.querySelectorAll('th:not([scope])')].filter(t => !t.matches(ownTh))
    .map(t => (t.closest('[id]') || {}).id + ' th "' + t.innerText.trim().slice(0, 30) + '"');
  const described = new Set([...document.querySelectorAll('[aria-describedby]')]
    .flatMap(el => el.getAttribute('aria-describedby').split(/\\s+/)));
  const help = [...document.querySelectorAll('.help[id]')].filter(h => h.innerText.trim() && !described.has(h.id))
    .map(h => h.id);
  return {th: th.slice(0, 6), help};
}"""


def _problems(page: Any) -> dict[str, Any]:
    seen = page.evaluate(AUDIT)
    found: dict[str, Any] = {}
    if not seen["lang"]:
        found["lang"] = "no lang on <html>"
    if len(seen["h1"]) != 1:
        found["h1"] = seen["h1"]
    for key in ("skips", "headless", "contrast"):
        if seen[key]:
            found[key] = seen[key]
    if page.get_by_role("navigation").count() < 1:
        found["navigation landmarks"] = 0
    ours = page.evaluate(TABLES_AND_HELP, DJANGO_OWN_TH)
    if ours["th"]:
        found["unscoped th"] = ours["th"]
    if ours["help"]:
        found["help text describing no control"] = ours["help"]
    unnamed = [u for u in _unnamed(page) if not DJANGO_OWN_UNNAMED.search(u)]
    if unnamed:
        found["unnamed"] = unnamed
    found.update(keyboard_findings(page)[0])
    return found


def test_quartermasters_admin_lists_and_forms_are_usable_by_keyboard_and_screen_reader(session: Any) -> None:  # noqa: F811
    fill_the_fleet()
    now = timezone.now()
    maintenance.create(user("admin"), start_at=now + timezone.timedelta(hours=2), duration_s=3600,
                       reason="firmware upgrade", nodes=[Node.objects.order_by("name").first()])
    admin = session("admin")
    report: dict[str, Any] = {}
    # The index, which Django leaves without a <nav> (it empties the breadcrumbs and has no
    # sidebar): the account's links are one (admin/base_site.html), as on every admin page.
    admin.page.goto(admin.base + "/admin/")
    if found := _problems(admin.page):
        report["/admin/"] = found
    expect(admin.page.get_by_role("navigation", name="Your account and the site")).to_have_count(1)
    expect(admin.page.get_by_role("navigation", name="Your account and the site")
           .get_by_role("link", name="View site")).to_have_count(1)
    for name, model in MODELS.items():
        if model is None:
            pk = user("alice").pk
        else:
            pk = model.objects.order_by("pk").values_list("pk", flat=True).first()
        for path in (f"/admin/{name}/", f"/admin/{name}/{pk}/change/"):
            admin.page.goto(admin.base + path)
            found = _problems(admin.page)
            if found:
                report[path] = found
        if name == "controlplane/pricerate":
            # A time box says its time zone, which the field's help says only to the eye.
            admin.page.goto(f"{admin.base}/admin/{name}/{pk}/change/")
            expect(admin.page.get_by_role("textbox", name="Effective from, time (UTC)", exact=True)).to_have_count(1)
            expect(admin.page.get_by_role("textbox", name="Effective from, date", exact=True)).to_have_count(1)
    # The read-only Scheduler policy page (SchedulerLeaseAdmin.policy_view): a page of ours.
    admin.page.goto(admin.base + "/admin/controlplane/schedulerlease/policy/")
    if found := _problems(admin.page):
        report["/admin/controlplane/schedulerlease/policy/"] = found
    assert not report, "accessibility problems:\n" + "\n".join(
        f"{where}:\n" + "\n".join(f"  {k}: {v}" for k, v in found.items()) for where, found in report.items())
