"""A quota's figure past its ceiling is refused on the admin's forms in the ceiling's words, at
any size, and the box itself says the ceiling (its `max`).

Demo walk, 8 Dec: a nominal of 2000000000 on the quota page was refused "2000000000 is more than
1,000,000 GPUs, the most a quota may name", but 99999999999 (a key held down) "Ensure this value
is less than or equal to 2147483647.": the integer column's bound, which the box's `max` said
too, so an admin told 2147483647 was the most typed 2000000000 and was told otherwise. The
quota's fields now take at most the ceiling (`MAX_QUOTA_GPUS`) and say so in one sentence,
on the quota page and in the team page's quota rows."""

from __future__ import annotations

import re
from typing import Any

import pytest

from controlplane.models import Quota, Team

pytestmark = pytest.mark.django_db

CEILING = "is more than 1,000,000 GPUs, the most a quota may name"
FIELDS = ("nominal_gpus", "borrowing_limit", "lending_limit")


@pytest.mark.parametrize("field", FIELDS)
def test_a_figure_past_the_integer_column_is_refused_in_the_ceilings_words(fleet: Any, browser: Any,
                                                                           field: str) -> None:
    quota = fleet.ml.quotas.get()
    form = {"team": quota.team_id, "gpu_type": quota.gpu_type_id, "nominal_gpus": 16, "borrowing_limit": "",
            "lending_limit": ""}
    answer = browser.post(f"/admin/controlplane/quota/{quota.pk}/change/", {**form, field: 99_999_999_999})

    assert answer.status_code == 200
    assert dict(answer.context["adminform"].form.errors) == {field: [f"99999999999 {CEILING}"]}
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 16


def test_the_quota_pages_boxes_say_the_ceiling(fleet: Any, browser: Any) -> None:
    quota = fleet.ml.quotas.get()
    pages = (f"/admin/controlplane/quota/{quota.pk}/change/", f"/admin/controlplane/team/{quota.team_id}/change/")
    for page in pages:
        html = browser.get(page).content.decode()
        boxes = re.findall(r'<input type="number" name="(?:quotas-\d+-)?(\w+)"[^>]*max="(\d+)"', html)
        maxima = {name: int(most) for name, most in boxes if name in FIELDS}
        assert maxima == dict.fromkeys(FIELDS, 1_000_000), (page, boxes)


def test_the_team_pages_quota_row_refuses_it_in_the_ceilings_words(fleet: Any, browser: Any) -> None:
    quota = fleet.ml.quotas.get()
    team = Team.objects.get(pk=quota.team_id)
    page = browser.get(f"/admin/controlplane/team/{team.pk}/change/")
    form: dict[str, Any] = {}
    for bound in page.context["adminform"].form:
        form[bound.html_name] = bound.value() if bound.value() is not None else ""
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        for key, value in formset.management_form.initial.items():
            form[f"{formset.prefix}-{key}"] = value
        for sub in formset.forms:
            for bound in sub:
                value = bound.value()
                if isinstance(value, list | tuple):
                    continue
                form[bound.html_name] = "" if value is None else value
    form = {k: (v.pk if hasattr(v, "pk") else v) for k, v in form.items()}
    form["quotas-0-nominal_gpus"] = 99_999_999_999

    answer = browser.post(f"/admin/controlplane/team/{team.pk}/change/", form)

    assert answer.status_code == 200, answer.get("Location")
    [formset] = [s.formset for s in answer.context["inline_admin_formsets"] if s.formset.model is Quota]
    assert formset.errors[0] == {"nominal_gpus": [f"99999999999 {CEILING}"]}
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 16
