"""A job's `queue_position` and `eta` are its place in the queue while it waits, null after.

Found with `qm list --all`: jobs cancelled while waiting still showed POS 19, 20, 21, and the API
gave each an `eta`, a start that will never come (a job cancelled while waiting keeps its last
PendingPlace row, for its reason's numbers)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.api.serializers import JobSerializer, job_payload
from controlplane.choices import JobState
from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_a_job_cancelled_while_waiting_has_no_place_and_no_eta(fleet, alice) -> None:
    eta = timezone.now() + timedelta(hours=1)
    job = f.make_job(fleet.ml, pending_code="QuotaExceeded", queue_position=3, eta=eta)
    waiting = alice.get(f"{J}/jobs/{job.pk}/").json()
    assert waiting["queue_position"] == 3 and waiting["eta"] is not None

    cancel = alice.post(f"{J}/jobs/{job.pk}/cancel/").json()
    detail = alice.get(f"{J}/jobs/{job.pk}/").json()
    listed = alice.get(f"{J}/jobs/", {"state": "cancelled"}).json()["results"]

    for answer in (cancel["job"], detail, listed[0]):
        assert answer["state"] == JobState.CANCELLED
        assert (answer["queue_position"], answer["eta"]) == (None, None)
    stored = Job.objects.select_related("team", "project", "submitter", "priority_class", "place").get(pk=job.pk)
    stored.gpus_held = 0
    assert job_payload(stored) == dict(JobSerializer(stored).data)  # the documented serializer agrees

