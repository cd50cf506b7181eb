"""An admin who lowers a quota below what the team holds is told what that does and does not do.

Found on the demo: vision's H100 quota lowered from 40 to 16 while it ran 40 GPUs of jobs, and
serving's raised to its share. The admin page said only "changed successfully", though lowering a
quota stops nothing by itself; what the team holds above the new nominal is borrowed in its
cohort, which other teams reclaim by preemption (docs/operations.md, *Changing quotas on a
running fleet*).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone

from controlplane.models import Quota
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db


def _quota_form(quota: Quota, **changes: Any) -> dict[str, Any]:
    fields = {"team": quota.team_id, "gpu_type": quota.gpu_type_id, "nominal_gpus": quota.nominal_gpus,
              "borrowing_limit": quota.borrowing_limit if quota.borrowing_limit is not None else "",
              "lending_limit": quota.lending_limit if quota.lending_limit is not None else ""}
    return {**fields, **changes}


def _warnings(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request) if m.level_tag == "warning"]


@pytest.fixture
def ml_runs_16(fleet) -> Quota:  # type: ignore[no-untyped-def]
    """ml (nominal 16 H100) runs two 8-GPU jobs."""
    now = timezone.now()
    for n in fleet.nodes[1:3]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(n, 8)], now)
    return fleet.ml.quotas.get(gpu_type=fleet.h100)


def test_lowering_a_quota_below_what_the_team_holds_warns_with_the_numbers(fleet, browser, ml_runs_16) -> None:
    r = browser.post(f"/admin/controlplane/quota/{ml_runs_16.pk}/change/", _quota_form(ml_runs_16, nominal_gpus=6),
                     follow=True)

    assert r.status_code == 200
    assert Quota.objects.get(pk=ml_runs_16.pk).nominal_gpus == 6
    [warning] = [w for w in _warnings(r) if "holds" in w]
    assert warning.startswith("Team ml holds 16 H100-80GB GPUs now, 10 above its new nominal 6.")
    assert "lowering a quota stops nothing" in warning
    assert "In cohort all the 10 above nominal count as borrowed (its jobs started last)" in warning


def test_the_same_warning_on_the_teams_page(fleet, browser, ml_runs_16) -> None:
    path = f"/admin/controlplane/team/{fleet.ml.pk}/change/"
    page = browser.get(path)
    form = f.admin_change_form(page)
    for inline in page.context["inline_admin_formsets"]:
        for i, inline_form in enumerate(inline.formset.forms):
            if inline.formset.model is Quota and inline_form.instance.pk == ml_runs_16.pk:
                form[f"{inline.formset.prefix}-{i}-nominal_gpus"] = 8
    form = {k: v for k, v in form.items() if v is not False}

    r = browser.post(path, form, follow=True)

    assert r.status_code == 200
    assert Quota.objects.get(pk=ml_runs_16.pk).nominal_gpus == 8
    assert [w for w in _warnings(r) if w.startswith("Team ml holds 16 H100-80GB GPUs now, 8 above its new nominal 8.")]


@pytest.mark.parametrize("nominal", [16, 24])
def test_no_warning_when_the_team_holds_no_more_than_its_quota(fleet, browser, ml_runs_16, nominal) -> None:
    r = browser.post(f"/admin/controlplane/quota/{ml_runs_16.pk}/change/",
                     _quota_form(ml_runs_16, nominal_gpus=nominal), follow=True)

    assert r.status_code == 200 and Quota.objects.get(pk=ml_runs_16.pk).nominal_gpus == nominal
    assert not [w for w in _warnings(r) if "holds" in w]


def test_a_team_in_no_cohort_is_told_any_owed_team_reclaims_what_it_holds(fleet, browser, ml_runs_16) -> None:
    type(fleet.ml).objects.filter(pk=fleet.ml.pk).update(cohort=None)

    r = browser.post(f"/admin/controlplane/quota/{ml_runs_16.pk}/change/", _quota_form(ml_runs_16, nominal_gpus=6),
                     follow=True)

    [warning] = [w for w in _warnings(r) if "holds" in w]
    assert ("It is in no cohort, so it borrows the 10 above nominal from the teams whose guarantee they are: a team "
            "of any cohort owed its guarantee may reclaim them by preemption") in warning


def test_a_quota_moved_to_a_team_holding_more_than_it_is_said_with_that_teams_numbers(fleet, browser) -> None:
    now = timezone.now()
    quota = f.make_quota(fleet.vision, fleet.a100, 4)
    hold(running_job(fleet.ml, gpus=8, started_at=now), [(fleet.nodes[4], 8)], now)

    r = browser.post(f"/admin/controlplane/quota/{quota.pk}/change/", _quota_form(quota, team=fleet.ml.pk),
                     follow=True)

    assert r.status_code == 200 and Quota.objects.get(pk=quota.pk).team_id == fleet.ml.pk
    assert [w for w in _warnings(r) if w.startswith("Team ml holds 8 A100-40GB GPUs now, 4 above its nominal 4.")]
