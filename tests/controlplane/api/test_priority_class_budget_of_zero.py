"""A preemption budget of 0: taken, and said.

Found by a fleet admin's review (6 Dec): a class's preemption budget protects its jobs from
every preemption once spent, a reclaim of borrowed GPUs included (scheduler_core/victims.py,
`_protection`; `tests/scheduler_core/test_engine_explain_budget_lifts.py`), so a budget of 0
means no job of the class is ever preempted, not even to give a lending team its guarantee
back: the lender waits with no ETA. The demo's production class has it. Yet the API said
nothing (`warnings: []`), and the admin's list read "not preemptible" in the budget's column,
as if only priority preemption were off; `PATCH {"preemption_budget": 0}` on best-effort (0 as
"no limit", as many schedulers read it) answered 200 with `preemptible: true` and no word."""

from __future__ import annotations

import re

import pytest
from django.contrib.messages import get_messages

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_preemptible_class_given_a_budget_of_zero_is_told_it_is_never_preempted(fleet, admin) -> None:
    r = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/", {"preemption_budget": 0}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["warnings"] == [
        "Priority class research has a preemption budget of 0: no job of it is ever preempted, not even to give "
        "back GPUs its team borrowed beyond its quota (the lending team waits for them to end), so preemptible "
        "yes does nothing. Give a budget of 1 or more (preemptions of one job per budget window)."]
    again = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/", {"preemption_budget": 2}, format="json")
    assert again.json()["warnings"] == []


def test_a_class_not_preemptible_with_a_budget_of_zero_is_told_it_keeps_borrowed_gpus(fleet, admin) -> None:
    r = admin.patch(f"{J}/priority-classes/{fleet.production.pk}/", {"preemption_budget": 0}, format="json")

    assert r.status_code == 200, r.json()
    assert r.json()["warnings"] == [
        "Priority class production has a preemption budget of 0: no job of it is ever preempted, not even to give "
        "back GPUs its team borrowed beyond its quota (the lending team waits for them to end). Preemptible no "
        "already keeps higher classes off its jobs; a budget of 1 or more lets a lending team reclaim its "
        "guarantee."]
    listed = {c["name"]: c["warnings"] for c in admin.get(f"{J}/priority-classes/").json()["results"]}
    assert len(listed["production"]) == 1 and listed["research"] == []


def _budget_cell(html: str, name: str) -> str:
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        if f">{name}</a>" in row:
            cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
            return cells[-2]
    raise AssertionError(f"no row for {name}")


def test_the_admin_list_and_save_say_what_a_budget_of_zero_does(fleet, browser) -> None:
    f.make_priority_class("critical", 5000, preemptible=False, preemption_budget=0)
    f.make_priority_class("guarded", 4000, preemptible=False, preemption_budget=2)
    html = browser.get("/admin/controlplane/priorityclass/").content.decode()
    assert _budget_cell(html, "critical") == "none: never preempted, borrowed GPUs included"
    assert _budget_cell(html, "guarded") == "not by priority; of borrowed GPUs, 2 preemptions per job per 1 d"

    path = f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/"
    form = f.opened_admin_form(browser, path)
    form["preemption_budget"] = 0
    r = browser.post(path, form, follow=True)
    assert r.status_code == 200 and r.redirect_chain
    warnings = [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]
    assert warnings and warnings[0].startswith("Priority class research has a preemption budget of 0: no job of it "
                                               "is ever preempted")
