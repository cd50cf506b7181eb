"""A team added on the admin's *Add team* page with its quota rows is held to the rule a team's
change page and the API hold: in no cohort a team borrows from no one and lends to no one, so a
borrowing or lending limit on its quota is refused on the field (models/quotas.Quota.clean).

Until 7 Dec the rule skipped a quota whose team was not saved yet (`team_id` None), so a new team
in no cohort was stored with "borrowing limit 5, lending limit 2", which `qm quotas` and the API
then showed as a promise the engine never keeps."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.models import Quota, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
ADD = "/admin/controlplane/team/add/"


def _new_team(fleet: Any, *, cohort: str, borrowing: Any, lending: Any) -> dict[str, Any]:
    empty = {"TOTAL_FORMS": 0, "INITIAL_FORMS": 0, "MIN_NUM_FORMS": 0, "MAX_NUM_FORMS": 1000}
    form: dict[str, Any] = {"name": "solo", "description": "", "cohort": cohort, "default_priority_class": ""}
    for prefix in ("memberships", "projects"):
        form.update({f"{prefix}-{k}": v for k, v in empty.items()})
    form.update({f"quotas-{k}": v for k, v in {**empty, "TOTAL_FORMS": 1}.items()})
    form.update({"quotas-0-gpu_type": fleet.h100.pk, "quotas-0-nominal_gpus": 4,
                 "quotas-0-borrowing_limit": borrowing, "quotas-0-lending_limit": lending})
    return form


def test_a_new_team_in_no_cohort_is_refused_quota_limits_on_their_fields(fleet, browser) -> None:
    answer = browser.post(ADD, _new_team(fleet, cohort="", borrowing=5, lending=2))

    assert answer.status_code == 200
    [formset] = [s.formset for s in answer.context["inline_admin_formsets"] if s.formset.model is Quota]
    errors = formset.errors[0]
    assert "team solo is in no cohort, so it borrows from no one" in str(errors["borrowing_limit"])
    assert "team solo is in no cohort, so it lends to no one" in str(errors["lending_limit"])
    assert not Team.objects.filter(name="solo").exists()
    assert not Quota.objects.filter(team__name="solo").exists()
    assert not f.trail().exists()


def test_a_new_team_in_no_cohort_takes_a_quota_with_no_limits(fleet, browser) -> None:
    answer = browser.post(ADD, _new_team(fleet, cohort="", borrowing="", lending=0))

    assert answer.status_code == 302, answer.content.decode()[:2000]
    quota = Quota.objects.get(team__name="solo")
    assert (quota.nominal_gpus, quota.borrowing_limit, quota.lending_limit) == (4, None, 0)


def test_a_new_team_in_a_cohort_takes_its_quota_limits(fleet, browser) -> None:
    cohort = fleet.ml.cohort
    answer = browser.post(ADD, _new_team(fleet, cohort=cohort.pk, borrowing=5, lending=2))

    assert answer.status_code == 302, answer.content.decode()[:2000]
    quota = Quota.objects.get(team__name="solo")
    assert (quota.team.cohort_id, quota.borrowing_limit, quota.lending_limit) == (cohort.pk, 5, 2)


def test_two_rows_of_one_gpu_type_or_one_project_name_say_the_rule(fleet, browser) -> None:
    """A new team's rows are checked against each other by the formset alone (the model's own
    check reads the rows stored, and there are none yet): until 7 Dec it said Django's "Please
    correct the duplicate data for gpu_type." and "… for name.", naming no rule."""
    form = _new_team(fleet, cohort="", borrowing="", lending="")
    form.update({"quotas-TOTAL_FORMS": 2, "quotas-1-gpu_type": fleet.h100.pk, "quotas-1-nominal_gpus": 2,
                 "projects-TOTAL_FORMS": 2, "projects-0-name": "eval", "projects-1-name": "eval"})

    answer = browser.post(ADD, form)

    assert answer.status_code == 200
    html = answer.content.decode()
    assert "A team has one quota per GPU type: give all of this type&#x27;s GPUs and limits in one row." in html
    assert "A team has one project of a name: give each row another name." in html
    assert "duplicate" not in html
    assert not Team.objects.filter(name="solo").exists()
