"""Quota changes made in the admin UI (/admin/) are recorded as quota.changed events, as the
API's are: before and after, who, which team.

Found by using the product: the README sends admins to /admin/ to tune quotas, but only the
API's changes reached the audit trail; a quota raised, lowered or deleted in the admin left no
trace."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import EventKind
from controlplane.models import Event, Quota
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _form(quota: Quota, **changes: Any) -> dict[str, Any]:
    fields = {"team": quota.team_id, "gpu_type": quota.gpu_type_id, "nominal_gpus": quota.nominal_gpus,
              "borrowing_limit": quota.borrowing_limit or "", "lending_limit": quota.lending_limit or ""}
    return {**fields, **changes}


def test_a_quota_changed_in_the_admin_is_recorded_with_before_and_after(fleet, browser) -> None:
    quota = fleet.ml.quotas.get()

    r = browser.post(f"/admin/controlplane/quota/{quota.pk}/change/", _form(quota, nominal_gpus=24, borrowing_limit=8))

    assert r.status_code == 302, r.content[:2000]
    event = Event.objects.get(kind=EventKind.QUOTA_CHANGED)
    assert event.team == fleet.ml and event.actor == "user:boss" and event.reason == "QuotaChanged"
    assert event.data["before"]["nominal_gpus"] == 16 and event.data["before"]["borrowing_limit"] is None
    assert event.data["after"]["nominal_gpus"] == 24 and event.data["after"]["borrowing_limit"] == 8
    assert event.data["after"]["team"] == "ml" and event.data["after"]["gpu_type"] == "H100-80GB"


def test_a_quota_added_and_deleted_in_the_admin_is_recorded(fleet, browser) -> None:
    r = browser.post("/admin/controlplane/quota/add/", {
        "team": fleet.ml.pk, "gpu_type": fleet.a100.pk, "nominal_gpus": 4, "borrowing_limit": "",
        "lending_limit": "",
    })
    assert r.status_code == 302, r.content[:2000]
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.a100)

    r = browser.post(f"/admin/controlplane/quota/{quota.pk}/delete/", {"post": "yes"})

    assert r.status_code == 302 and not Quota.objects.filter(pk=quota.pk).exists()
    created, deleted = Event.objects.filter(kind=EventKind.QUOTA_CHANGED).order_by("id")
    assert created.reason == "QuotaCreated" and created.data["before"] is None
    assert created.data["after"]["nominal_gpus"] == 4
    assert deleted.reason == "QuotaDeleted" and deleted.data["after"] is None
    assert deleted.data["before"]["gpu_type"] == "A100-40GB" and deleted.team == fleet.ml


def test_quotas_changed_on_the_teams_admin_page_are_recorded(fleet, browser) -> None:
    quota = fleet.ml.quotas.get()
    page = browser.get(f"/admin/controlplane/team/{fleet.ml.pk}/change/")
    assert page.status_code == 200
    # The team page's inlines: memberships, projects and quotas, each a formset.
    form = f.admin_change_form(page)
    for inline in page.context["inline_admin_formsets"]:
        for i, inline_form in enumerate(inline.formset.forms):
            if inline.formset.model is Quota and inline_form.instance.pk == quota.pk:
                form[f"{inline.formset.prefix}-{i}-nominal_gpus"] = 12
    form = {k: v for k, v in form.items() if v is not False}

    r = browser.post(f"/admin/controlplane/team/{fleet.ml.pk}/change/", form)

    assert r.status_code == 302, r.context["errors"]
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 12
    event = Event.objects.get(kind=EventKind.QUOTA_CHANGED)
    assert event.data["before"]["nominal_gpus"] == 16 and event.data["after"]["nominal_gpus"] == 12
    assert event.actor == "user:boss"
