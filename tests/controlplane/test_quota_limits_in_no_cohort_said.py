"""A team in no cohort borrows and lends nothing, and the admin's quota list, the teams page and
`qm quotas` say so, where they said "no limit" (an empty limit) or the limit the quota kept from a
cohort the team has left.

Found on the demo (4 Dec): team solo, in no cohort, quota 8 on H100 with no limits, read "MAY
BORROW no limit" in `qm quotas` and "8 / no limit" on /teams/ while its second 8-GPU job waited
"team solo uses 8 of 8 nominal H100-80GB GPUs and can borrow 0 more"."""

from __future__ import annotations

import pytest

from controlplane.models import Quota
from tests.controlplane.test_admin_quota_list_lent import _list
from tests.controlplane.test_admin_teams_page_limits import _quota_cell

pytestmark = pytest.mark.django_db


@pytest.fixture
def ml_left_its_cohort(fleet) -> None:  # type: ignore[no-untyped-def]
    """ml leaves cohort all keeping a lending limit of 4; its borrowing limit is empty."""
    Quota.objects.filter(team=fleet.ml).update(lending_limit=4)
    fleet.ml.cohort = None
    fleet.ml.save()


def test_the_admin_quota_list_says_a_team_in_no_cohort_borrows_and_lends_none(fleet, browser,
                                                                               ml_left_its_cohort) -> None:
    rows = _list(browser)

    ml, vision = rows[("ml", "H100-80GB")], rows[("vision", "H100-80GB")]
    assert (ml["Cohort"], ml["Borrowing limit"], ml["Lending limit"]) == ("-", "none (no cohort)", "none (no cohort)")
    assert (vision["Borrowing limit"], vision["Lending limit"]) == ("no limit", "no limit")


def test_the_teams_page_says_it_too(fleet, browser, ml_left_its_cohort) -> None:
    html = browser.get("/teams/").content.decode()

    assert _quota_cell(html, "ml") == "H100-80GB: 16 / none (no cohort) — uses 0"
    assert _quota_cell(html, "vision").startswith("H100-80GB: 16 / no limit — uses 0")

