"""Why is my job waiting, and when will it start? End to end on PostgreSQL: the cycle stores
the engine's reason and ETA, and the API's explain answers them with the times in UTC.

* A job blocked by a victim's minimum runtime is told when the protection lifts and when it
  starts after the victim's grace period (before: the victim's runtime limit, hours later).
* A team that must borrow from its cohort is told when the lender's job ends by its runtime
  limit (before: no ETA at all, since only its own jobs were asked).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Cohort, GpuType, Job, Node, PriorityClass, Quota, Team
from controlplane.services import cycle
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

GRACE_S = 45
MIN_RUNTIME_S = 600


@pytest.fixture
def why_fleet(db: Any) -> dict[str, Any]:
    """Two 8-GPU H100 nodes; teams ml and lend (8 nominal GPUs each) in one cohort, team big
    (24) in none; class batch
    (grace 45 s, minimum runtime 600 s) and class prod, which may preempt it."""
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    for i in range(2):
        Node.objects.create(name=f"n{i}", pool="h100", gpu_type=h100, gpu_count=8, cpus=96,
                            memory_gb=1024, leaf_switch="leaf-0", spine="spine-0")
    batch = PriorityClass.objects.create(name="batch", value=100, grace_period_s=GRACE_S,
                                         min_runtime_s=MIN_RUNTIME_S)
    PriorityClass.objects.create(name="prod", value=1000, preemptible=False)
    cohort = Cohort.objects.create(name="all")
    teams = {}
    for name, nominal in (("ml", 8), ("lend", 8), ("big", 24)):
        teams[name] = Team.objects.create(name=name, cohort=cohort if nominal == 8 else None,
                                          default_priority_class=batch)
        Quota.objects.create(team=teams[name], gpu_type=h100, nominal_gpus=nominal)
    admin = APIClient()
    admin.force_authenticate(f.make_user("boss", superuser=True))
    return {"teams": teams, "api": admin}


def _submit(team: Team, name: str, gpus: int, *, priority: str = "batch", limit_s: int = 3600,
            **shape: Any) -> Job:
    at = timezone.now() - timedelta(minutes=1)
    return Job.objects.create(
        team=team, name=name, priority_class=PriorityClass.objects.get(name=priority), gpus=gpus,
        runtime_limit_s=limit_s, submitted_at=at, state_changed_at=at, **shape,
    )


def _started(job: Job, seconds_ago: float) -> datetime:
    """Bind `job` in one cycle and date its start back, as if its agents had confirmed it."""
    assert cycle.run_cycle("worker-1").binds == 1
    started = (timezone.now() - timedelta(seconds=seconds_ago)).replace(microsecond=0)
    Allocation.objects.filter(job=job, state=AllocationState.ACTIVE).update(started_at=started)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=started)
    return started


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _eta(body: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(body["eta"].replace("Z", "+00:00"))


def test_a_job_blocked_by_a_minimum_runtime_is_told_when_it_lifts(why_fleet: dict[str, Any]) -> None:
    big = why_fleet["teams"]["big"]  # within its quota: only the minimum runtime stops it
    victim = _submit(big, "sweep", 16, gpus_per_node=8, limit_s=4 * 3600)
    started = _started(victim, seconds_ago=120)
    urgent = _submit(big, "urgent", 8, priority="prod")

    result = cycle.run_cycle("worker-1")

    assert result.stops == 0 and result.binds == 0
    body = why_fleet["api"].get(f"/api/v1/jobs/{urgent.pk}/explain/").json()
    assert body["reason_code"] == "MinimumRuntimeProtected", body["reason"]
    lifts = started + timedelta(seconds=MIN_RUNTIME_S)
    assert (f"it may preempt it from {_utc(lifts)} and start once it has stopped, by "
            f"{_utc(lifts + timedelta(seconds=GRACE_S))}.") in body["reason"]
    assert f"{victim.pk} has run " in body["reason"]
    assert abs((_eta(body) - lifts - timedelta(seconds=GRACE_S)).total_seconds()) < 1
    assert body["queue_position"] == 1


def test_a_team_borrowing_from_its_cohort_is_told_when_the_lender_frees(
        why_fleet: dict[str, Any]) -> None:
    ml, lend = why_fleet["teams"]["ml"], why_fleet["teams"]["lend"]
    lender = _submit(lend, "lender", 8, limit_s=3600)
    started = _started(lender, seconds_ago=600)
    borrower = _submit(ml, "borrower", 12, gpus_per_node=4)

    cycle.run_cycle("worker-1")

    body = why_fleet["api"].get(f"/api/v1/jobs/{borrower.pk}/explain/").json()
    # The head waits for what its cohort lends: it holds the reservation, and with it the
    # promise of that quota (until 7 Dec only a head its own team's releases admitted did,
    # and its team's later jobs could take the quota it waited for).
    assert body["reason_code"] == "WaitingForReservation"
    assert "when the jobs of team ml's cohort have released the 4 H100-80GB GPUs its quota lacks now (team ml " \
           "uses 0 of 8 nominal H100-80GB GPUs and can borrow 0 more (cohort all has no unused H100-80GB GPUs to " \
           "lend now); this job needs 12)" in body["reason"], body["reason"]
    assert body["would_start_if"] == ("the jobs of team ml's cohort on the quota it needs and its reserved GPUs "
                                      "end (at the latest by their runtime limits)")
    assert body["eta"] is not None
    assert abs((_eta(body) - started - timedelta(seconds=3600)).total_seconds()) < 1
