"""A lender's lending limit lowered while teams of its cohort borrow its GPUs: the figures say
what is lent now, and the change's answer says how many GPUs are lent beyond the new limit and
how they come back.

Found by QA: with ml running 8 of vision's unused H100 guarantee, `PATCH quotas/{vision}/
{"lending_limit": 0}` answered 200 with `"warnings": []`, and vision's `lent_gpus` (the API, the
teams page, the admin's quota list) read 0 while ml still ran on those GPUs: showback counted
vision's guarantee idle. ml keeps them (a limit stops nothing) and borrows no more; they come
back when vision reclaims them, preempting the borrowed work first (the engine does:
tests/scheduler_core/test_engine_quota.py,
test_a_lender_whose_lending_limit_was_lowered_under_its_borrowers_reclaims_them; and so does a
real cycle, below)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import EventKind
from controlplane.models import Event, Quota
from controlplane.services import cycle
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet, client_for

pytestmark = pytest.mark.django_db

SAID = ("Team vision lends 8 H100-80GB GPUs now, 8 beyond its new lending limit 0: teams of cohort all borrowed them "
        "before and keep them (lowering a lending limit stops nothing), but borrow no more. They come back when "
        "vision reclaims them: a job of vision within its nominal preempts the borrowed work first, after its "
        "class's minimum runtime")


@pytest.fixture
def ml_borrows_8(fleet: Fleet) -> dict[str, Any]:
    """32 H100s, guaranteed 16 to ml and 16 to vision (cohort all); ml runs 24, 8 of them
    borrowed from vision, which runs nothing."""
    now = timezone.now() - timedelta(hours=1)
    jobs = []
    for k, node in enumerate(fleet.nodes[1:4]):
        job = running_job(fleet.ml, gpus=8, started_at=now + timedelta(minutes=k), priority_class=fleet.research,
                          runtime_limit_s=4 * 3600)
        hold(job, [(node, 8)], job.started_at, borrowed=k == 2)
        jobs.append(job)
    return {"jobs": jobs, "vision": Quota.objects.get(team=fleet.vision, gpu_type=fleet.h100)}


def _lower(fleet: Fleet, quota: Quota, limit: int) -> dict[str, Any]:
    client: APIClient = client_for(fleet, "admin")
    r = client.patch(f"/api/v1/quotas/{quota.pk}/", {"lending_limit": limit}, format="json")
    assert r.status_code == 200, r.content
    return dict(r.json())


def test_lowering_a_lending_limit_under_borrowers_says_how_many_are_lent_beyond_it(
        fleet: Fleet, ml_borrows_8: dict[str, Any]) -> None:
    answer = _lower(fleet, ml_borrows_8["vision"], 0)

    assert answer["lent_gpus"] == 8.0, "ml still runs on them"
    [said] = [w for w in answer["warnings"] if "lending limit" in w]
    assert said.startswith(SAID), said
    read = client_for(fleet, "admin").get(f"/api/v1/quotas/{ml_borrows_8['vision'].pk}/").json()
    assert (read["lent_gpus"], read["warnings"]) == (8.0, [])


def test_a_limit_still_above_what_is_lent_says_nothing(fleet: Fleet, ml_borrows_8: dict[str, Any]) -> None:
    answer = _lower(fleet, ml_borrows_8["vision"], 8)
    assert answer["lent_gpus"] == 8.0 and not [w for w in answer["warnings"] if "lending limit" in w]


def test_the_admins_quota_page_says_the_same(fleet: Fleet, browser: Any, ml_borrows_8: dict[str, Any]) -> None:
    quota = ml_borrows_8["vision"]
    form = {"team": quota.team_id, "gpu_type": quota.gpu_type_id, "nominal_gpus": quota.nominal_gpus,
            "borrowing_limit": "", "lending_limit": 0}
    r = browser.post(f"/admin/controlplane/quota/{quota.pk}/change/", form, follow=True)

    assert r.status_code == 200 and Quota.objects.get(pk=quota.pk).lending_limit == 0
    warnings = [str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"]
    assert [w for w in warnings if w.startswith(SAID)], warnings


def test_the_lender_reclaims_them_in_a_cycle_preempting_the_borrowed_job(fleet: Fleet,
                                                                         ml_borrows_8: dict[str, Any]) -> None:
    _lower(fleet, ml_borrows_8["vision"], 0)
    # 16: vision's whole nominal, the 8 free GPUs of h100-0 and 8 that ml borrowed
    incident = f.make_job(fleet.vision, gpus=16, priority_class=fleet.research, runtime_limit_s=3600,
                          gpu_types=["H100-80GB"])

    result = cycle.run_cycle("worker-1")

    assert result.stops == 1 and result.binds == 0
    [notice] = Event.objects.filter(kind=EventKind.JOB_PREEMPTING)
    assert notice.job_id == ml_borrows_8["jobs"][-1].pk, "the borrowed job goes"
    assert f"for job {incident.pk}" in notice.message
