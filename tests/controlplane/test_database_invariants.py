"""The database itself refuses the impossible, whatever code path tries it."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, InternalError, transaction
from django.utils import timezone

from controlplane.choices import AllocationState
from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import (
    Allocation,
    AllocationGpu,
    Job,
    Node,
    PriorityClass,
    Quota,
    SchedulerLease,
    Team,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def fleet() -> None:
    seed_demo_fleet()


def _job(name: str) -> Job:
    now = timezone.now()
    return Job.objects.create(
        team=Team.objects.get(name="vision"), name=name, priority_class=PriorityClass.objects.get(name="research"),
        gpus=1, runtime_limit_s=3600, submitted_at=now, state_changed_at=now,
    )


def _allocation(job: Job, generation: int, node: Node, gpu: int) -> Allocation:
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=timezone.now())
    AllocationGpu.objects.create(allocation=allocation, node=node, gpu_index=gpu)
    return allocation


def test_gpu_in_two_live_allocations_is_refused(fleet: None) -> None:
    node = Node.objects.get(name="h100-01")
    _allocation(_job("first"), 1, node, 3)
    with pytest.raises(IntegrityError), transaction.atomic():
        _allocation(_job("second"), 2, node, 3)


def test_gpu_is_reusable_once_its_old_owner_is_no_longer_live(fleet: None) -> None:
    node = Node.objects.get(name="h100-01")
    old = _allocation(_job("first"), 1, node, 3)
    Allocation.objects.filter(pk=old.pk).update(state=AllocationState.FENCED)
    AllocationGpu.objects.filter(allocation=old).update(live=False)
    _allocation(_job("second"), 2, node, 3)
    assert AllocationGpu.objects.filter(node=node, gpu_index=3, live=True).count() == 1


def test_allocation_generation_never_goes_backwards(fleet: None) -> None:
    allocation = _allocation(_job("first"), 7, Node.objects.get(name="h100-01"), 0)
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        Allocation.objects.filter(pk=allocation.pk).update(generation=6)
    Allocation.objects.filter(pk=allocation.pk).update(generation=8)
    allocation.refresh_from_db()
    assert allocation.generation == 8


def test_scheduler_epoch_never_goes_backwards(fleet: None) -> None:
    lease = SchedulerLease.objects.create(name="scheduler", holder="a", epoch=5)
    with pytest.raises((IntegrityError, InternalError)), transaction.atomic():
        SchedulerLease.objects.filter(pk=lease.pk).update(epoch=4)


def test_negative_quota_is_refused(fleet: None) -> None:
    quota = Quota.objects.first()
    assert quota is not None
    with pytest.raises(IntegrityError), transaction.atomic():
        Quota.objects.filter(pk=quota.pk).update(nominal_gpus=-1)
    with pytest.raises(IntegrityError), transaction.atomic():
        Quota.objects.filter(pk=quota.pk).update(borrowing_limit=-4)


def test_job_with_zero_gpus_is_refused(fleet: None) -> None:
    job = _job("tiny")
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.filter(pk=job.pk).update(gpus=0)
