"""A refusal on an admin page names the other fields it speaks of by the page's labels; the API
keeps its field names. One rule in the model (Quota.clean, PriorityClass.clean) says both: it
names a field as a `FieldNamed` the surface words (the API: `nominal_gpus`; the admin's forms,
OpenedAsForm: "Nominal GPUs").

Found on the admin's walk of the demo (7 Dec): a lending limit above nominal was refused on the
quota page with "5 is more than nominal_gpus (4)", a name the page shows nowhere (its box reads
"Nominal GPUs")."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import Quota, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
LENDING = "5 is more than {nominal} (4): a team lends only its unused nominal quota; leave it empty to lend all of it."


def _change(browser: Any, path: str, **changes: Any) -> Any:
    return browser.post(path, f.opened_admin_form(browser, path) | changes)


def test_the_quota_page_names_nominal_gpus_by_its_label(fleet, browser) -> None:
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    path = f"/admin/controlplane/quota/{quota.pk}/change/"

    r = _change(browser, path, nominal_gpus=4, lending_limit=5)

    assert r.status_code == 200, "the form was accepted"
    assert dict(r.context["adminform"].form.errors) == {"lending_limit": [LENDING.format(nominal="Nominal GPUs")]}
    assert Quota.objects.get(pk=quota.pk).lending_limit is None


def test_the_team_pages_quota_row_names_it_by_its_column(fleet, browser) -> None:
    path = f"/admin/controlplane/team/{fleet.ml.pk}/change/"
    form = f.opened_admin_form(browser, path)

    r = browser.post(path, form | {"quotas-0-nominal_gpus": 4, "quotas-0-lending_limit": 5})

    assert r.status_code == 200, "the form was accepted"
    [formset] = [s.formset for s in r.context["inline_admin_formsets"] if s.formset.model is Quota]
    assert formset.errors[0] == {"lending_limit": [LENDING.format(nominal="Nominal GPUs")]}


def test_the_api_keeps_its_field_name(fleet) -> None:
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)

    r = client_for(fleet, "admin").patch(f"/api/v1/quotas/{quota.pk}/", {"nominal_gpus": 4, "lending_limit": 5},
                                         format="json")

    assert r.status_code == 400 and r.json()["errors"] == {"lending_limit": [LENDING.format(nominal="nominal_gpus")]}


def test_a_limit_out_of_cohort_names_its_own_field_by_the_label_too(fleet, browser) -> None:
    solo = Team.objects.create(name="solo")
    quota = Quota.objects.create(team=solo, gpu_type=fleet.h100, nominal_gpus=4)
    path = f"/admin/controlplane/quota/{quota.pk}/change/"

    page = _change(browser, path, lending_limit=2)
    api = client_for(fleet, "admin").patch(f"/api/v1/quotas/{quota.pk}/", {"lending_limit": 2}, format="json")

    [said] = page.context["adminform"].form.errors["lending_limit"]
    assert said.endswith("or leave Lending limit empty"), said
    assert api.json()["errors"]["lending_limit"][0].endswith("or leave lending_limit empty"), api.json()


def test_the_priority_class_page_names_the_max_runtime_limit_by_its_label(fleet, browser) -> None:
    path = f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/"

    r = _change(browser, path, min_runtime_s=99999999)

    [said] = r.context["adminform"].form.errors["min_runtime_s"]
    assert said.startswith("99999999 s is beyond Max runtime limit (s) (604800 s)"), said
