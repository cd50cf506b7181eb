"""Maintenance windows in real scheduling cycles: a window stored by services/maintenance.py
reaches the engine through the snapshot, so a job whose run would overlap it waits with the
reason MaintenanceWindow while one that ends before it begins starts on the same node; a
cancelled window frees the node at the next cycle."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Job
from controlplane.services import cycle, maintenance
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import LoopFleet, make_job, register_node


def _gpus_on(job: Job, node: str) -> int:
    return AllocationGpu.objects.filter(allocation__job=job, live=True, node__name=node).count()


def test_a_job_whose_limit_overlaps_the_window_waits_and_one_that_ends_before_it_binds_there(
        fleet: LoopFleet) -> None:
    register_node("gpu-a")  # the only node, free
    root = f.make_user("root", superuser=True)
    window = maintenance.create(root, nodes=["gpu-a"], start_at=timezone.now() + timedelta(hours=1),
                                duration_s=4 * 3600, reason="firmware upgrade")
    long = make_job(fleet, gpus=8, name="two-hours", runtime_limit_s=2 * 3600)

    cycle.run_cycle("worker-1")

    long.refresh_from_db()
    assert long.state == JobState.PENDING and _gpus_on(long, "gpu-a") == 0
    assert long.pending_code == "MaintenanceWindow", (long.pending_code, long.pending_message)
    assert "gpu-a" in long.pending_message
    # It may start once the window has ended.
    assert long.eta is not None and long.eta >= window.end_at - timedelta(seconds=1)

    short = make_job(fleet, gpus=8, name="half-hour", runtime_limit_s=30 * 60,
                     submitted_at=long.submitted_at + timedelta(seconds=1))
    cycle.run_cycle("worker-1")

    short.refresh_from_db()
    long.refresh_from_db()
    assert short.state == JobState.RUNNING and _gpus_on(short, "gpu-a") == 8
    # Still waiting; now the node is busy too, it waits for its reservation, which the window
    # puts after its end.
    assert long.state == JobState.PENDING and _gpus_on(long, "gpu-a") == 0
    assert long.eta is not None and long.eta >= window.end_at - timedelta(seconds=1)


def test_a_cancelled_window_frees_its_node_at_the_next_cycle(fleet: LoopFleet) -> None:
    register_node("gpu-a")
    root = f.make_user("root", superuser=True)
    window = maintenance.create(root, nodes=["gpu-a"], start_at=timezone.now() + timedelta(minutes=30),
                                duration_s=3600, reason="cabling")
    job = make_job(fleet, gpus=4, name="held-off", runtime_limit_s=3600)
    cycle.run_cycle("worker-1")
    assert Job.objects.get(pk=job.pk).pending_code == "MaintenanceWindow"

    maintenance.cancel(window.pk, root)
    cycle.run_cycle("worker-1")

    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING and _gpus_on(job, "gpu-a") == 4
