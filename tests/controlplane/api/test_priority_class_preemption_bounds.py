"""A preemptible class's minimum runtime within its longest run, and a budget window that counts
something, refused on the field otherwise (API and admin, by PriorityClass.clean). Found on the
demo (2 Dec): `PATCH priority-classes/2/ {"min_runtime_s": 99999999}` (3 years; the class's
longest run is 7 days) and `{"budget_window_s": 0}` answered 200: the first made every job of
the preemptible class research unpreemptible, the second made its budget of 3 count nothing, so
its jobs could be preempted without end; neither said so."""

from __future__ import annotations

import pytest

from controlplane.models import PriorityClass

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.mark.parametrize("body,field,words", [
    ({"min_runtime_s": 99999999}, "min_runtime_s",
     "99999999 s is beyond max_runtime_limit_s (604800 s): no job of the class would ever run long enough to be "
     "preempted; to protect its jobs from preemption, set preemptible to false"),
    ({"budget_window_s": 0}, "budget_window_s",
     "0 s counts no preemption, so the budget of 3 would never protect a job; give the window the budget counts "
     "over (86400 s: a day)"),
])
def test_a_preemption_rule_that_undoes_itself_is_refused_on_its_field(fleet, admin, body, field, words) -> None:
    research = fleet.research
    before = PriorityClass.objects.values().get(pk=research.pk)

    r = admin.patch(f"{J}/priority-classes/{research.pk}/", body, format="json")

    assert r.status_code == 400 and r.json()["errors"] == {field: [words]}, r.json()
    assert PriorityClass.objects.values().get(pk=research.pk) == before


def test_within_bounds_or_for_a_class_never_preempted_they_are_taken(fleet, admin) -> None:
    research, production = fleet.research, fleet.production

    ok = admin.patch(f"{J}/priority-classes/{research.pk}/", {"min_runtime_s": 7 * 86400, "budget_window_s": 3600},
                     format="json")
    none = admin.patch(f"{J}/priority-classes/{research.pk}/", {"budget_window_s": 0, "preemption_budget": 0},
                       format="json")
    never = admin.patch(f"{J}/priority-classes/{production.pk}/", {"min_runtime_s": 99999999, "budget_window_s": 0},
                        format="json")

    assert ok.status_code == 200 and ok.json()["min_runtime_s"] == 7 * 86400, ok.json()
    assert none.status_code == 200, none.json()
    assert never.status_code == 200, never.json()


def test_the_admin_form_says_it_on_the_field(fleet, browser) -> None:
    research = fleet.research
    page = browser.get(f"/admin/controlplane/priorityclass/{research.pk}/change/")
    form = page.context["adminform"].form
    data = {name: form.initial.get(name) for name in form.fields}
    data = {k: ("on" if v is True else "" if v in (False, None) else v) for k, v in data.items()}

    r = browser.post(f"/admin/controlplane/priorityclass/{research.pk}/change/", {**data, "min_runtime_s": 99999999})

    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert "min_runtime_s" in errors and "beyond Max runtime limit (s) (604800 s)" in errors["min_runtime_s"][0]
    assert PriorityClass.objects.get(pk=research.pk).min_runtime_s == research.min_runtime_s
