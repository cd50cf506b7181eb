"""A waiting job's whole reason, as the engine said it, on PostgreSQL: the longest sentence the
engine writes (a job over its quota holding a reservation that could also start by preempting
up to three protected jobs) runs to some 750 characters, and the jobs row held 500. The cycle
cut it before its last clause, "it may preempt them from … and start once they have stopped, by
…", which is the very time the job is told as its ETA: on the demo (5 Dec) job 53's page, `qm
explain` and the API read "Holds a reservation … from 22:09:33 UTC … the candidates are
protected: job 36 has run 63 s of its 300 s minimum runtime; …" beside an ETA of 22:05:03 that
nothing on the page explained (the job.pending event, 1,000 characters, had it whole)."""

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

GRACE_S = 30
MIN_RUNTIME_S = 300


@pytest.fixture
def fleet(db: Any) -> dict[str, Any]:
    """Three 8-GPU H100 nodes; team vision (8 nominal) and team lend (16) in one cohort; class
    research (grace 30 s, minimum runtime 300 s) and class production, which may preempt it."""
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    for i in range(3):
        Node.objects.create(name=f"h{i}", pool="h100", gpu_type=h100, gpu_count=8, cpus=96,
                            memory_gb=1024, leaf_switch="leaf-0", spine="spine-0")
    research = PriorityClass.objects.create(name="research", value=500, grace_period_s=GRACE_S,
                                            min_runtime_s=MIN_RUNTIME_S)
    PriorityClass.objects.create(name="production", value=1000, preemptible=False)
    cohort = Cohort.objects.create(name="shared-fleet")
    teams = {}
    for name, nominal in (("vision", 8), ("lend", 16)):
        teams[name] = Team.objects.create(name=name, cohort=cohort, default_priority_class=research)
        Quota.objects.create(team=teams[name], gpu_type=h100, nominal_gpus=nominal)
    admin = APIClient()
    admin.force_authenticate(f.make_user("boss", superuser=True))
    return {"teams": teams, "api": admin}


def _submit(team: Team, name: str, gpus: int, *, priority: str = "research", limit_s: int = 3600,
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


def test_the_longest_reason_is_stored_whole_with_the_clause_that_explains_its_eta(fleet: dict[str, Any]) -> None:
    vision = fleet["teams"]["vision"]
    starts = [_started(_submit(vision, f"sweep-{i}", 4, limit_s=4 * 3600), seconds_ago=60 + 10 * i)
              for i in range(4)]
    urgent = _submit(vision, "urgent", 16, priority="production", gpus_per_node=8)

    cycle.run_cycle("worker-1")

    body = fleet["api"].get(f"/api/v1/jobs/{urgent.pk}/explain/").json()
    assert body["reason_code"] == "WaitingForReservation", body["reason"]
    assert "…" not in body["reason"]
    lifts = max(starts[:2]) + timedelta(seconds=MIN_RUNTIME_S)  # the two it would take, the latest started
    assert body["reason"].endswith(f"it may preempt them from {_utc(lifts)} and start once they have stopped, "
                                   f"by {_utc(lifts + timedelta(seconds=GRACE_S))}."), body["reason"]
    eta = datetime.fromisoformat(body["eta"].replace("Z", "+00:00"))
    assert abs((eta - lifts - timedelta(seconds=GRACE_S)).total_seconds()) < 1  # the ETA that clause explains
