"""/metrics: a requeue someone asked for (POST jobs/{id}/requeue/) is an eviction under its own
reason (Requeued), not a preemption, and its lost work counts with every requeue's."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event
from controlplane.services import accounting, requeue, transitions
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.accounting.test_accounting_metrics import scrape


def test_a_requeue_asked_for_is_evicted_with_reason_requeued_and_its_lost_work_counted(fleet, clients) -> None:
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=1)
    job = running_job(fleet.ml, gpus=2, started_at=start)
    allocation = hold(job, [(fleet.nodes[1], 2)], start)
    requeue.requeue(fleet.users["owner"], job.pk, reason="bad node")
    transitions.complete_release(allocation.pk, exit_code=143, at=now, actor="agent:h100-1")
    accounting.catch_up(now + timedelta(seconds=1))

    m = scrape(clients["admin"])

    evicted = m["quartermaster_evicted_jobs_total"]
    assert evicted[(("priority_class", "research"), ("reason", "Requeued"), ("team", "ml"))] == 1
    assert not any(dict(labels).get("reason") == "Requeued"
                   for labels in m.get("quartermaster_preempted_jobs_total", {}))
    job.refresh_from_db()
    assert job.lost_gpu_seconds > 0
    assert m["quartermaster_requeue_lost_gpu_seconds_total"][()] >= job.lost_gpu_seconds - 1


def test_a_requeue_of_an_ended_job_stops_nothing_so_it_is_no_eviction(fleet, clients) -> None:
    # a failed job put back in the queue: job.requeued, but no run was cut short
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=1)
    job = running_job(fleet.ml, gpus=2, started_at=start)
    allocation = hold(job, [(fleet.nodes[1], 2)], start)
    transitions.complete_release(allocation.pk, exit_code=1, at=now - timedelta(minutes=1), actor="agent:h100-1")
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    requeue.requeue(fleet.users["owner"], job.pk, reason="rerun")
    accounting.catch_up(now + timedelta(seconds=1))

    m = scrape(clients["admin"])

    assert not any(dict(labels).get("reason", "").startswith("Requeued")
                   for labels in m.get("quartermaster_evicted_jobs_total", {})), m.get("quartermaster_evicted_jobs_total")
    assert Event.objects.get(job=job, kind=EventKind.JOB_REQUEUED).reason == transitions.REQUEUED_AFTER_END
