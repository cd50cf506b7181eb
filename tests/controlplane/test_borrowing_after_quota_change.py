"""A team's quota lowered (or raised) under its running jobs: the cycle stores which of them now
count as borrowed, as the engine acts on them.

Found by QA: with vision's nominal set to 0 while its job ran 4 A100s, the engine treated the job
as borrowed (a lender reclaims it first), but the job, its allocation, the API's `borrowed`, the
job page and `qm status` still said it ran within quota, and nothing recorded the change."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Allocation, Event, Job, Quota
from controlplane.services import accounting, cycle
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def ml_runs_16(fleet: Fleet) -> dict[str, Any]:
    """ml runs two 8-GPU H100 jobs, all of its nominal 16: the newer one started last."""
    now = timezone.now()
    older = running_job(fleet.ml, gpus=8, started_at=now - timedelta(minutes=30), priority_class=fleet.research,
                        runtime_limit_s=4 * 3600)
    hold(older, [(fleet.nodes[1], 8)], older.started_at)
    newer = running_job(fleet.ml, gpus=8, started_at=now - timedelta(minutes=10), priority_class=fleet.research,
                        runtime_limit_s=4 * 3600)
    allocation = hold(newer, [(fleet.nodes[2], 8)], newer.started_at)
    return {"older": older, "newer": newer, "allocation": allocation,
            "quota": Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)}


def _set_nominal(fleet: Fleet, quota: Quota, nominal: int) -> None:
    r = client_for(fleet, "admin").patch(f"/api/v1/quotas/{quota.pk}/", {"nominal_gpus": nominal},
                                         content_type="application/json")
    assert r.status_code == 200, r.content


def test_a_job_beyond_a_lowered_quota_is_stored_as_borrowed_with_an_event(fleet: Fleet, ml_runs_16: dict[str, Any]) -> None:
    _set_nominal(fleet, ml_runs_16["quota"], 8)

    cycle.run_cycle("worker-1")

    newer, older = ml_runs_16["newer"], ml_runs_16["older"]
    assert Job.objects.get(pk=newer.pk).borrowed and not Job.objects.get(pk=older.pk).borrowed
    assert Allocation.objects.get(pk=ml_runs_16["allocation"].pk).borrowed
    [event] = Event.objects.filter(kind=EventKind.JOB_BORROWING)
    assert event.job_id == newer.pk and event.allocation_id == ml_runs_16["allocation"].pk
    assert event.message == ("Now counts as borrowed: team ml holds 16 H100-80GB GPUs, 8 above its nominal quota of 8; "
                             "a lender reclaiming its GPUs preempts borrowed work first")
    assert client_for(fleet, "owner").get(f"/api/v1/jobs/{newer.pk}/").json()["borrowed"] is True

    cycle.run_cycle("worker-1")
    assert Event.objects.filter(kind=EventKind.JOB_BORROWING).count() == 1, "said once, not every cycle"


def test_a_raised_quota_leaves_the_borrowed_mark(fleet: Fleet, ml_runs_16: dict[str, Any]) -> None:
    """A mark is never cleared (docs/engine.md, *Quotas and cohorts*): the job, its allocation
    and the API keep saying borrowed, and no second event is written."""
    _set_nominal(fleet, ml_runs_16["quota"], 8)
    cycle.run_cycle("worker-1")
    _set_nominal(fleet, ml_runs_16["quota"], 16)

    cycle.run_cycle("worker-1")

    newer = ml_runs_16["newer"]
    assert Job.objects.get(pk=newer.pk).borrowed
    assert Allocation.objects.get(pk=ml_runs_16["allocation"].pk).borrowed
    assert Event.objects.filter(kind=EventKind.JOB_BORROWING).count() == 1


def test_usage_before_the_change_keeps_its_flag(fleet: Fleet, ml_runs_16: dict[str, Any]) -> None:
    """Borrowed GPU-hours count from the change on: the job's usage before it stays within quota
    however often the rollup derives those minutes again."""
    _set_nominal(fleet, ml_runs_16["quota"], 8)
    cycle.run_cycle("worker-1")
    changed_at = Event.objects.get(kind=EventKind.JOB_BORROWING).created_at
    newer = ml_runs_16["newer"]

    spans, _ = accounting.held_spans(newer.started_at, timezone.now() + timedelta(minutes=1), newer.pk)

    assert [(s.borrowed, s.start_us, s.end_us) for s in spans] == [
        (False, accounting.to_us(newer.started_at), accounting.to_us(changed_at)),
        (True, accounting.to_us(changed_at), None),
    ]


def test_a_quota_lowered_to_zero_makes_every_running_job_borrowed_in_one_cycle(
        fleet: Fleet, ml_runs_16: dict[str, Any]) -> None:
    _set_nominal(fleet, ml_runs_16["quota"], 0)

    cycle.run_cycle("worker-1")

    jobs = [ml_runs_16["older"].pk, ml_runs_16["newer"].pk]
    assert list(Job.objects.filter(pk__in=jobs, borrowed=True).order_by("pk").values_list("pk", flat=True)) == jobs
    assert sorted(Event.objects.filter(kind=EventKind.JOB_BORROWING).values_list("job_id", flat=True)) == jobs
    assert Allocation.objects.filter(job_id__in=jobs, borrowed=True).count() == 2
