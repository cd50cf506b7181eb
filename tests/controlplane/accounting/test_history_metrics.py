"""/metrics says what it counts, and counts one outcome under one name.

Found by an SRE and a platform engineer reading /metrics against the event history:
- `quartermaster_finished_jobs_total` had two series for jobs that hit their runtime limit,
  `reason="Timedout"` (settled by an exit or a confirmed stop) and `reason="TimedOut"` (settled
  by a fence), so a dashboard summing one of them missed the rest. Every path now writes
  `TimedOut`, and events an older version stored as `Timedout` are counted under it too.
- `quartermaster_preemption_lost_gpu_seconds_total` also counted the work lost to fences and
  resizes. It is now `quartermaster_requeue_lost_gpu_seconds_total`, whose HELP says so; the old
  name stays one release, same value, its HELP saying it is deprecated.
- `quartermaster_admission_attempt_duration_seconds_count` read 70 against 209 cycles: it
  counts the cycles the fleet samples recorded (one every SAMPLE_EVERY_S), not every cycle.
  Its HELP now says so and points at `quartermaster_cycles_total`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from controlplane.choices import EventKind, JobState
from controlplane.models import FleetSample, Job, SchedulerLease
from controlplane.services import accounting, reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet


def families(client: APIClient) -> dict[str, Any]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    return {family.name: family for family in text_string_to_metric_families(response.content.decode())}


def samples(family: Any) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples if not s.name.endswith("_created")}


@pytest.fixture
def admin(clients: dict[str, APIClient]) -> APIClient:
    return clients["admin"]


def _stop_and_release(job: Job, allocation: Any, reason: str, at: Any) -> None:
    transitions.signal_stop(allocation.pk, allocation.generation, reason=reason, grace_period_s=30, at=at,
                            actor="test", message="stop")
    transitions.complete_release(allocation.pk, exit_code=-15, at=at + timedelta(seconds=5), actor="test")


def test_jobs_that_hit_their_runtime_limit_are_one_finished_series(admin: APIClient, fleet: Fleet) -> None:
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(minutes=10)
    settled = running_job(fleet.ml, gpus=1, started_at=start)
    _stop_and_release(settled, hold(settled, [(fleet.nodes[0], 1)], start), transitions.RELEASE_RUNTIME_LIMIT,
                      now - timedelta(minutes=2))
    # An event an older version stored, with the other spelling.
    old = f.make_job(fleet.ml, gpus=1, state=JobState.TIMED_OUT, started_at=start, submitted_at=start)
    transitions.record_event(EventKind.JOB_FINISHED, "agent", job=old, at=now - timedelta(minutes=1),
                             reason="Timedout", data={"state": JobState.TIMED_OUT.value})
    accounting.catch_up(now)

    finished = samples(families(admin)["quartermaster_finished_jobs"])

    reasons = {dict(labels)["reason"] for labels in finished}
    assert "Timedout" not in reasons
    assert finished[(("priority_class", "research"), ("reason", "TimedOut"), ("team", "ml"))] == 2


def test_work_lost_to_preemptions_resizes_and_fences_is_one_counter_that_says_so(admin: APIClient, fleet: Fleet) -> None:
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(minutes=20)
    preempted = running_job(fleet.ml, gpus=2, started_at=start)
    _stop_and_release(preempted, hold(preempted, [(fleet.nodes[0], 2)], start), transitions.RELEASE_PREEMPTED,
                      now - timedelta(minutes=5))
    fenced = running_job(fleet.ml, gpus=4, started_at=start)
    allocation = hold(fenced, [(fleet.nodes[1], 4)], start)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        assert transitions.fence_allocation(allocation.pk, lease=lease, at=now - timedelta(minutes=4), actor="test",
                                            reason="NodeLeaseExpired")
    accounting.catch_up(now)
    lost = sum(Job.objects.filter(pk__in=[preempted.pk, fenced.pk]).values_list("lost_gpu_seconds", flat=True))
    assert lost == pytest.approx(2 * (15 * 60 + 5) + 4 * 16 * 60)  # the preempted one stopped 5 s after its signal

    found = families(admin)

    requeue = found["quartermaster_requeue_lost_gpu_seconds"]
    assert samples(requeue)[()] == pytest.approx(lost, abs=0.01)
    assert "fence" in requeue.documentation and "resize" in requeue.documentation
    deprecated = found["quartermaster_preemption_lost_gpu_seconds"]
    assert samples(deprecated)[()] == pytest.approx(lost, abs=0.01)
    assert "Deprecated" in deprecated.documentation
    assert "quartermaster_requeue_lost_gpu_seconds_total" in deprecated.documentation


def test_the_admission_attempt_histogram_says_it_counts_sampled_cycles(admin: APIClient, fleet: Fleet) -> None:
    now = timezone.now().replace(microsecond=0)
    SchedulerLease.objects.get_or_create(name="scheduler")
    SchedulerLease.objects.filter(name="scheduler").update(holder="w1", epoch=1, last_cycle_ms=30.0, cycles=209)
    for i in range(3):
        FleetSample.objects.create(at=now - timedelta(seconds=5 * i), epoch=1, total_gpus=48, allocated_gpus=0,
                                   stranded_gpus=0, pending_jobs=0, running_jobs=0, cycle_ms=30.0)
    accounting.catch_up(now)

    found = families(admin)

    histogram = found["quartermaster_admission_attempt_duration_seconds"]
    count = {s.name: s.value for s in histogram.samples}["quartermaster_admission_attempt_duration_seconds_count"]
    assert count == 3
    assert samples(found["quartermaster_cycles"])[()] == 209
    assert "sampled" in histogram.documentation and "quartermaster_cycles_total" in histogram.documentation
