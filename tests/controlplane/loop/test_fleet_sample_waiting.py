"""A fleet sample counts one set of waiting jobs in every waiting figure: the jobs still
waiting after the cycle. The overview's "Jobs waiting" tile (pending_jobs) and the queue chart
(pending_by_priority, pending_by_team, pending_by_team_priority) must agree, and a job admitted
in the very cycle that took the sample is no longer waiting in any of them (nor in the age of
the oldest feasible waiting job)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Cohort, FleetSample, GpuType, Job, Node, PriorityClass, Quota, Team
from controlplane.services import cycle

pytestmark = pytest.mark.django_db


def _job(team: Team, name: str, gpus: int, klass: PriorityClass, minutes_ago: float) -> Job:
    at = timezone.now() - timedelta(minutes=minutes_ago)
    return Job.objects.create(team=team, name=name, priority_class=klass, gpus=gpus, runtime_limit_s=3600,
                              submitted_at=at, state_changed_at=at)


def test_every_waiting_figure_of_a_sample_counts_the_jobs_still_waiting_after_the_cycle() -> None:
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    for i in range(2):
        Node.objects.create(name=f"n{i}", pool="h100", gpu_type=h100, gpu_count=8, cpus=96, memory_gb=1024,
                            leaf_switch="leaf-0", spine="spine-0")
    cohort = Cohort.objects.create(name="all")
    batch = PriorityClass.objects.create(name="batch", value=100, min_runtime_s=0)
    prod = PriorityClass.objects.create(name="prod", value=1000, preemptible=False)
    ml = Team.objects.create(name="ml", cohort=cohort, default_priority_class=batch)
    cv = Team.objects.create(name="cv", cohort=cohort, default_priority_class=prod)
    Quota.objects.create(team=ml, gpu_type=h100, nominal_gpus=16)
    Quota.objects.create(team=cv, gpu_type=h100, nominal_gpus=16)
    # The oldest job, of the higher class, is admitted by this cycle; the two 16-GPU jobs then
    # cannot fit on the 8 GPUs left and wait.
    admitted = _job(cv, "admitted", 8, prod, minutes_ago=30)
    _job(ml, "wait-1", 16, batch, minutes_ago=2)
    _job(ml, "wait-2", 16, batch, minutes_ago=1)

    result = cycle.run_cycle("worker-1")

    assert result.binds == 1
    assert Job.objects.get(pk=admitted.pk).state != JobState.PENDING
    sample = FleetSample.objects.get()
    assert sample.pending_jobs == 2
    assert sum(sample.pending_by_priority.values()) == sample.pending_jobs
    assert sum(sample.pending_by_team.values()) == sample.pending_jobs
    assert sum(n for by in sample.pending_by_team_priority.values() for n in by.values()) == sample.pending_jobs
    # The job bound this cycle counts in none of them.
    assert sample.pending_by_priority == {"batch": 2}
    assert sample.pending_by_team == {"ml": 2}
    assert sample.pending_by_team_priority == {"ml": {"batch": 2}}
    # The oldest still waiting was submitted 2 minutes ago, not the admitted job's 30.
    assert sample.oldest_feasible_pending_s is not None
    assert 100 <= sample.oldest_feasible_pending_s <= 300
