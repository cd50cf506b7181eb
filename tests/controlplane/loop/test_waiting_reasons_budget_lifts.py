"""When does a job blocked by a victim's preemption budget start? End to end on PostgreSQL: the
snapshot tells the engine when the victim's budget window lets it go (its last preemption plus
the window: the job keeps a count and the time of its last preemption, and the count leaves
the window with it), and the API's explain says so, with the times in UTC.

Before, the waiting job was told the candidates were protected and nothing about when: no
"may be preempted again" time, and the victim's runtime limit, days later, as its ETA.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, GpuType, Job, Node, PriorityClass, Quota, Team
from controlplane.services import cycle
from controlplane.services.snapshot import read_snapshot
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

GRACE_S = 45
BUDGET = 2
WINDOW_S = 86400


@pytest.fixture
def budget_fleet(db: Any) -> dict[str, Any]:
    """One 8-GPU H100 node; team big (16 nominal GPUs: the quota never stands in the way); class batch (grace 45 s, at most 2
    preemptions a day, no minimum runtime) and class prod, which may preempt it."""
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    Node.objects.create(name="n0", pool="h100", gpu_type=h100, gpu_count=8, cpus=96,
                        memory_gb=1024, leaf_switch="leaf-0", spine="spine-0")
    batch = PriorityClass.objects.create(name="batch", value=100, grace_period_s=GRACE_S,
                                         preemption_budget=BUDGET, budget_window_s=WINDOW_S)
    PriorityClass.objects.create(name="prod", value=1000, preemptible=False)
    team = Team.objects.create(name="big", default_priority_class=batch)
    Quota.objects.create(team=team, gpu_type=h100, nominal_gpus=16)
    admin = APIClient()
    admin.force_authenticate(f.make_user("boss", superuser=True))
    return {"team": team, "api": admin}


def _submit(team: Team, name: str, gpus: int, *, priority: str = "batch", limit_s: int = 3600) -> Job:
    at = timezone.now() - timedelta(minutes=1)
    return Job.objects.create(
        team=team, name=name, priority_class=PriorityClass.objects.get(name=priority), gpus=gpus,
        runtime_limit_s=limit_s, submitted_at=at, state_changed_at=at,
    )


def _running_after_preemptions(job: Job, times: int, last_ago: timedelta) -> datetime:
    """Bind ``job`` in one cycle, as if its agents had confirmed it 10 minutes ago, and give it
    ``times`` preemptions, the last ``last_ago`` ago. Returns that last preemption's time."""
    assert cycle.run_cycle("worker-1").binds == 1
    started = (timezone.now() - timedelta(minutes=10)).replace(microsecond=0)
    last = (timezone.now() - last_ago).replace(microsecond=0)
    Allocation.objects.filter(job=job, state=AllocationState.ACTIVE).update(started_at=started)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=started,
                                         preemption_count=times, last_preempted_at=last)
    return last


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _eta(body: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(body["eta"].replace("Z", "+00:00"))


def test_a_job_blocked_by_a_spent_preemption_budget_is_told_when_it_lifts(
        budget_fleet: dict[str, Any]) -> None:
    big = budget_fleet["team"]
    victim = _submit(big, "sweep", 8, limit_s=3 * 86400)
    last = _running_after_preemptions(victim, BUDGET, last_ago=timedelta(hours=3))
    urgent = _submit(big, "urgent", 8, priority="prod")

    result = cycle.run_cycle("worker-1")

    assert result.stops == 0 and result.binds == 0
    body = budget_fleet["api"].get(f"/api/v1/jobs/{urgent.pk}/explain/").json()
    assert body["reason_code"] == "PreemptionBudgetExhausted", body["reason"]
    lifts = last + timedelta(seconds=WINDOW_S)
    assert (f"job {victim.pk} was preempted {BUDGET} times in the last 24 h, its budget, and may be "
            f"preempted again from {_utc(lifts)}") in body["reason"]
    assert (f"it may preempt it from {_utc(lifts)} and start once it has stopped, by "
            f"{_utc(lifts + timedelta(seconds=GRACE_S))}.") in body["reason"]
    # its ETA is that start, not the victim's runtime limit (three days after its start)
    assert abs((_eta(body) - lifts - timedelta(seconds=GRACE_S)).total_seconds()) < 1
    assert body["queue_position"] == 1


def test_the_snapshot_reads_when_a_running_jobs_budget_frees(budget_fleet: dict[str, Any]) -> None:
    big = budget_fleet["team"]
    victim = _submit(big, "sweep", 8, limit_s=3 * 86400)
    last = _running_after_preemptions(victim, 1, last_ago=timedelta(hours=1))
    fresh = _submit(big, "fresh", 8)  # never preempted
    old = _submit(big, "old", 8)  # preempted, but its last preemption left the window
    Job.objects.filter(pk=old.pk).update(preemption_count=5,
                                         last_preempted_at=timezone.now() - timedelta(days=2))

    snapshot = read_snapshot(timezone.now(), 1).snapshot

    (running,) = snapshot.running
    assert running.spec.id == str(victim.pk)
    assert running.spec.preemptions_in_window == 1
    assert running.spec.preemption_budget_frees_at == pytest.approx(
        (last + timedelta(seconds=WINDOW_S)).timestamp())
    by_id = {spec.id: spec for spec in snapshot.pending}
    for job in (fresh, old):
        assert by_id[str(job.pk)].preemptions_in_window == 0
        assert by_id[str(job.pk)].preemption_budget_frees_at is None
