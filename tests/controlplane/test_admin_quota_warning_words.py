"""The warning after a quota change that leaves a team above its nominal says what is true of
that change.

Found on the demo: language held 37 H100 on a nominal 32 (5 borrowed, limit 48). Lowering only
its borrowing limit to 2 warned "5 above its new nominal 32 … (lowering a quota stops
nothing)" (the nominal had not changed) and nothing of the limit it was now 3 beyond; editing
only its lending limit warned the same; and with room left to borrow the warning said "it starts
no more H100-80GB work while over its quota and borrowing limit", which was not so.
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


@pytest.fixture
def ml_holds_24(fleet) -> Quota:  # type: ignore[no-untyped-def]
    """ml (nominal 16 H100, no borrowing limit, cohort all) runs three 8-GPU jobs."""
    now = timezone.now()
    for n in fleet.nodes[1:4]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(n, 8)], now)
    return fleet.ml.quotas.get(gpu_type=fleet.h100)


def _save(browser: Any, quota: Quota, **changes: Any) -> list[str]:
    path = f"/admin/controlplane/quota/{quota.pk}/change/"
    form = {k: v for k, v in f.admin_change_form(browser.get(path)).items() if v is not False}
    form.update(changes)
    r = browser.post(path, form, follow=True)
    assert r.status_code == 200 and r.redirect_chain, r.content[:3000]
    return [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning" and "holds" in str(m)]


def test_lowering_only_the_borrowing_limit_names_the_limit_not_a_new_nominal(fleet, browser, ml_holds_24) -> None:
    [warning] = _save(browser, ml_holds_24, borrowing_limit=4)

    assert warning.startswith(
        "Team ml holds 24 H100-80GB GPUs now, 8 above its nominal 16, 4 beyond its borrowing limit 4. Its running "
        "jobs keep them (changing a quota stops nothing); it starts no more H100-80GB work while over its quota "
        "and borrowing limit.")


def test_room_left_to_borrow_is_said_as_such(fleet, browser, ml_holds_24) -> None:
    [warning] = _save(browser, ml_holds_24, nominal_gpus=20, borrowing_limit=10)

    assert warning.startswith(
        "Team ml holds 24 H100-80GB GPUs now, 4 above its new nominal 20. Its running jobs keep them (changing a "
        "quota stops nothing); it may borrow up to 6 more H100-80GB GPUs where its cohort has them to lend.")


def test_a_change_to_the_lending_limit_alone_warns_of_nothing(fleet, browser, ml_holds_24) -> None:
    assert _save(browser, ml_holds_24, lending_limit=4) == []


def test_lowering_the_nominal_keeps_its_words(fleet, browser, ml_holds_24) -> None:
    [warning] = _save(browser, ml_holds_24, nominal_gpus=6)

    assert warning.startswith("Team ml holds 24 H100-80GB GPUs now, 18 above its new nominal 6. Its running jobs "
                              "keep them (lowering a quota stops nothing); it may borrow more H100-80GB GPUs (it "
                              "has no borrowing limit) where its cohort has them to lend.")
