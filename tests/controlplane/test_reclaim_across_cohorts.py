"""A team moved out of the cohort it borrowed from no longer keeps the borrowed GPUs out of its
lenders' reach.

Found on the demo: vision held 72 H100 GPUs on a nominal 16, borrowed from shared-fleet; moved
to a cohort of its own, language (owed its guarantee in shared-fleet) could not reclaim them
and waited hours for vision's runtime limits. Now capacity a side holds above its nominal,
beyond what it lends itself, is reclaimable by any team owed its guarantee."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, EventKind
from controlplane.models import Allocation, Event, Job, Team
from controlplane.services import cycle
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db


@pytest.fixture
def ml_borrowed_8_then_moved(fleet: Fleet) -> dict[str, Any]:
    """ml (nominal 16) runs three 8-GPU jobs on h100-1..3, the newest borrowed from cohort all;
    vision runs 8 of its 16 on h100-0. Then an admin moves ml to cohort `solo`."""
    now = timezone.now()
    ml_jobs = []
    for k, node in enumerate(fleet.nodes[1:4]):
        job = running_job(fleet.ml, gpus=8, started_at=now - timezone.timedelta(minutes=30 - k),
                          priority_class=fleet.research, runtime_limit_s=4 * 3600)
        hold(job, [(node, 8)], job.started_at, borrowed=k == 2)
        ml_jobs.append(job)
    own = running_job(fleet.vision, gpus=8, started_at=now, priority_class=fleet.research, runtime_limit_s=3600)
    hold(own, [(fleet.nodes[0], 8)], now)
    Team.objects.filter(pk=fleet.ml.pk).update(cohort=f.make_cohort("solo"))
    return {"ml_jobs": ml_jobs}


def test_the_old_cohort_reclaims_from_a_team_moved_away(fleet: Fleet, ml_borrowed_8_then_moved: dict[str, Any]) -> None:
    incident = f.make_job(fleet.vision, gpus=8, priority_class=fleet.research, runtime_limit_s=3600,
                          gpu_types=["H100-80GB"])

    result = cycle.run_cycle("worker-1")

    assert result.stops == 1 and result.binds == 0
    [notice] = Event.objects.filter(kind=EventKind.JOB_PREEMPTING)
    assert notice.job_id == ml_borrowed_8_then_moved["ml_jobs"][-1].pk, "the work started last goes first"
    assert f"team vision reclaims capacity it lent to team ml, for job {incident.pk}" in notice.message
    assert Allocation.objects.get(job_id=notice.job_id).state == AllocationState.RELEASING
    incident.refresh_from_db()
    assert incident.pending_code == "WaitingForPreemption", incident.pending_words


def test_no_reclaim_across_cohorts_where_the_new_cohort_lends_it(fleet: Fleet,
                                                                ml_borrowed_8_then_moved: dict[str, Any]) -> None:
    """ml's new cohort has a team with 8 unused H100 GPUs to lend: ml borrows there now, and
    vision (in all, whose nominal quotas ask 32 of the fleet's 32) waits; no one is preempted."""
    speech = f.make_team("speech", cohort=Team.objects.get(pk=fleet.ml.pk).cohort)
    f.make_quota(speech, fleet.h100, 8)
    f.make_job(fleet.vision, gpus=8, priority_class=fleet.research, runtime_limit_s=3600, gpu_types=["H100-80GB"])

    result = cycle.run_cycle("worker-1")

    assert result.stops == 0 and result.binds == 0
    assert not Event.objects.filter(kind=EventKind.JOB_PREEMPTING).exists()
    assert Job.objects.filter(team=fleet.ml, state="running").count() == 3
