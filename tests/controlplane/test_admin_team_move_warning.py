"""An admin who moves a team to another cohort while it holds more than its nominal quota is told
what the move does to those GPUs.

Found on the demo: vision held 72 H100 GPUs on a nominal 16 (56 borrowed from shared-fleet);
the admin moved it to a new cohort `solo` on its team page, which said only "changed
successfully". From then on language, owed 8 GPUs of its 32 nominal in shared-fleet, could no
longer reclaim them (reclaim worked within a cohort): its job went from "may preempt them from
01:53" to "Holds a reservation … from 05:48, when running jobs reach their runtime limits".
Reclaim now crosses cohorts from a side holding more above nominal than it lends itself
(tests/controlplane/test_reclaim_across_cohorts.py); the warning says when.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone

from controlplane.models import Cohort, Team
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db


def _warnings(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request) if m.level_tag == "warning"]


@pytest.fixture
def ml_borrows_8(fleet) -> Team:  # type: ignore[no-untyped-def]
    """ml (nominal 16 H100, cohort all) runs three 8-GPU jobs: 8 borrowed."""
    now = timezone.now()
    for n in fleet.nodes[1:4]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(n, 8)], now)
    return fleet.ml


def _move(browser: Any, team: Team, cohort: Cohort | None) -> Any:
    path = f"/admin/controlplane/team/{team.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    form["cohort"] = cohort.pk if cohort is not None else ""
    r = browser.post(path, form, follow=True)
    assert r.status_code == 200 and r.redirect_chain, r.content[:3000]
    return r


def test_moving_a_borrowing_team_to_another_cohort_says_when_its_old_cohort_reclaims(fleet, browser,
                                                                                      ml_borrows_8) -> None:
    solo = f.make_cohort("solo")

    r = _move(browser, ml_borrows_8, solo)

    assert Team.objects.get(pk=ml_borrows_8.pk).cohort == solo
    [warning] = [w for w in _warnings(r) if "holds" in w]
    assert warning == (
        "Team ml holds 24 H100-80GB GPUs, 8 above its nominal 16. Its running jobs keep them (moving a team stops "
        "nothing). The teams of cohort all (vision) may reclaim them by preemption only while cohort solo holds "
        "more H100-80GB GPUs above its nominal than its teams lend. In cohort solo no other team has H100-80GB "
        "quota to lend, so ml starts no more H100-80GB work above its nominal.")


def test_moving_a_borrowing_team_out_of_any_cohort_says_its_old_cohort_still_reclaims(fleet, browser, ml_borrows_8) -> None:
    r = _move(browser, ml_borrows_8, None)

    [warning] = [w for w in _warnings(r) if "holds" in w]
    assert ("The teams of cohort all (vision) may still reclaim them by preemption, after their class's minimum "
            "runtime: in no cohort, what ml holds above its nominal is another team's guarantee.") in warning
    assert warning.endswith("In no cohort, ml borrows nothing: it starts no more H100-80GB work above its nominal.")


def test_moving_a_team_that_holds_above_nominal_into_a_cohort_says_it_now_borrows_there(fleet, browser,
                                                                                       ml_borrows_8) -> None:
    Team.objects.filter(pk=ml_borrows_8.pk).update(cohort=None)
    other = f.make_cohort("other")
    f.make_quota(f.make_team("speech", cohort=other), fleet.h100, 8)

    r = _move(browser, ml_borrows_8, other)

    [warning] = [w for w in _warnings(r) if "holds" in w]
    assert warning.endswith(
        "In cohort other the 8 above nominal count as borrowed: a team of it owed its guarantee (speech) may "
        "reclaim them by preemption, after their class's minimum runtime.")


def test_no_warning_when_the_team_holds_no_more_than_its_quota(fleet, browser) -> None:
    r = _move(browser, fleet.ml, f.make_cohort("solo"))

    assert not [w for w in _warnings(r) if "holds" in w]
