"""A change page refused on save heads the form with the record as stored, not as refused.

Found on the demo: language's H100 quota (nominal 32) saved with a nominal of 5000000 was
refused on the field ("5000000 is more than 1,000,000 GPUs, the most a quota may name"), and the
page above the error read "Change quota / language × H100-80GB: 5000000", its tab "Error:
language × H100-80GB: 5000000": Django's form writes the values onto the record before the
model's checks refuse them, and the page named the record from it. Nothing was saved; the
heading said otherwise."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import PriorityClass, Quota
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _post(browser: Any, path: str, **changes: Any) -> Any:
    form = {**f.admin_change_form(browser.get(path)), **changes}
    return browser.post(path, {k: v for k, v in form.items() if v is not False})


def test_a_quota_refused_on_save_is_headed_as_stored(fleet, browser) -> None:
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)

    r = _post(browser, f"/admin/controlplane/quota/{quota.pk}/change/", nominal_gpus=5000000)

    assert r.status_code == 200
    page = r.content.decode()
    assert "5000000 is more than 1,000,000 GPUs" in page  # refused, on its field
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 16
    assert r.context["subtitle"] == "ml × H100-80GB: 16"
    assert "ml × H100-80GB: 5000000" not in page
    assert "<h2>ml × H100-80GB: 16</h2>" in page


def test_a_priority_class_refused_on_save_is_headed_as_stored(fleet, browser) -> None:
    r = _post(browser, f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/", value=777,
              min_runtime_s=10**7)

    assert r.status_code == 200 and r.context["errors"]
    assert PriorityClass.objects.get(pk=fleet.research.pk).value == 100
    assert r.context["subtitle"] == "research (100)"
    assert "research (777)" not in r.content.decode()


def test_a_page_saved_or_opened_is_headed_as_before(fleet, browser) -> None:
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)
    path = f"/admin/controlplane/quota/{quota.pk}/change/"

    assert browser.get(path).context["subtitle"] == "ml × H100-80GB: 16"
    r = browser.post(path, {**{k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False},
                            "nominal_gpus": 12, "_continue": "1"}, follow=True)
    assert r.context["subtitle"] == "ml × H100-80GB: 12"
