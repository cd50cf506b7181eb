"""A quota deleted under a team's running work: the API and the admin say what happens to the
GPUs it holds, and a team owed its guarantee reclaims them.

Before, `DELETE quotas/{id}/` of ml's H100 quota while ml ran 24 H100 GPUs answered 204 and
nothing else, and those GPUs were out of every owner's reach: a team with no quota was never a
reclaim victim (its jobs were not even marked borrowed), so vision, within its nominal, waited
for ml's runtime limits."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, Quota
from controlplane.services import cycle
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet, client_for

pytestmark = pytest.mark.django_db

SAID = ("Team ml's running jobs hold 24 H100-80GB GPUs: they keep them (deleting a quota stops nothing), but with no "
        "quota all of them count as borrowed, and any team owed its guarantee may reclaim them by preemption")


@pytest.fixture
def ml_runs_24(fleet: Fleet) -> dict[str, Any]:
    """ml runs three 8-GPU H100 jobs on h100-1..3; vision runs 8 of its 16 on h100-0."""
    now = timezone.now()
    jobs = []
    for k, node in enumerate(fleet.nodes[1:4]):
        job = running_job(fleet.ml, gpus=8, started_at=now - timezone.timedelta(minutes=30 - k),
                          priority_class=fleet.research, runtime_limit_s=4 * 3600)
        hold(job, [(node, 8)], job.started_at)
        jobs.append(job)
    own = running_job(fleet.vision, gpus=8, started_at=now, priority_class=fleet.research, runtime_limit_s=3600)
    hold(own, [(fleet.nodes[0], 8)], now)
    return {"jobs": jobs, "quota": Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)}


def test_deleting_a_quota_under_running_work_says_what_becomes_of_its_gpus(fleet: Fleet, ml_runs_24: dict[str, Any]) -> None:
    r = client_for(fleet, "admin").delete(f"/api/v1/quotas/{ml_runs_24['quota'].pk}/")

    assert r.status_code == 200, r.content
    assert any(line.startswith(SAID) for line in r.json()["consequences"]), r.json()


def test_the_admins_confirmation_page_says_the_same(fleet: Fleet, ml_runs_24: dict[str, Any]) -> None:
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")

    page = browser.get(f"/admin/controlplane/quota/{ml_runs_24['quota'].pk}/delete/")

    assert page.status_code == 200 and SAID in html.unescape(page.content.decode())


def test_a_team_owed_its_guarantee_reclaims_from_a_team_whose_quota_was_deleted(
        fleet: Fleet, ml_runs_24: dict[str, Any]) -> None:
    ml_runs_24["quota"].delete()
    incident = f.make_job(fleet.vision, gpus=8, priority_class=fleet.research, runtime_limit_s=3600,
                          gpu_types=["H100-80GB"])

    result = cycle.run_cycle("worker-1")

    assert result.stops == 1 and result.binds == 0
    [notice] = Event.objects.filter(kind=EventKind.JOB_PREEMPTING)
    assert notice.job_id == ml_runs_24["jobs"][-1].pk, "the work started last goes first"
    assert f"for job {incident.pk}" in notice.message
