"""The overview's "requeued off lost nodes" counts fences only: a requeue someone asked for
(POST jobs/{id}/requeue/, a job.requeued event with reason Requeued or RequeuedHeld) is no lost
node, though the work it threw away counts in the lost GPU-hours like any requeue's."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import Event
from controlplane.services import transitions
from frontend.fleet_series import lost_work_since
from tests.frontend.page_data import preempted_event


def test_requeues_asked_for_count_in_lost_hours_not_as_fenced_requeues(demo, submit_as, django_assert_num_queries):
    job = submit_as("alice")
    now = timezone.now()
    preempted_event(job, now, 3600.0, kind="job.requeued")  # off a lost node
    for reason in transitions.REQUESTED_REQUEUES:
        Event.objects.create(created_at=now, kind="job.requeued", actor="agent:test", reason=reason, job=job,
                             team_id=job.team_id, data={"lost_gpu_seconds": 1800.0})
    with django_assert_num_queries(1):
        lost = lost_work_since(now - timedelta(hours=1))
    assert lost == {"preemptions": 0, "fenced_requeues": 1, "resizes": 0, "lost_gpu_hours": pytest.approx(2.0)}
