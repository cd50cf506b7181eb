"""The jobs list, its live updates, the job page's badge and the timeline said "Preempting" (the
state's name) for a job its owner had cancelled or that had reached its runtime limit, while the
job page's notice said "Being cancelled". They now say the API's `state_label`: "Stopping:
cancelled", "Stopping: runtime limit", "Preempting"; the badge keeps the state's colour."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job
from controlplane.services import transitions
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def _stopping(submit_as, name: str, reason: str) -> Job:
    job = submit_as("alice", name=name, gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    if reason == transitions.RELEASE_CANCELLED:
        assert transitions.cancel_job(job, "user:alice")
    else:
        assert transitions.signal_stop(allocation.pk, allocation.generation, reason=reason, grace_period_s=30,
                                       at=timezone.now(), actor="scheduler@epoch:1", message=f"{reason}.")
    assert Job.objects.get(pk=job.pk).state == JobState.PREEMPTING
    return job


@pytest.fixture
def stopping(submit_as) -> dict[str, Job]:
    return {
        "stopping: cancelled": _stopping(submit_as, "cancelled", transitions.RELEASE_CANCELLED),
        "stopping: runtime limit": _stopping(submit_as, "timed-out", transitions.RELEASE_RUNTIME_LIMIT),
        "preempting": _stopping(submit_as, "preempted", transitions.RELEASE_PREEMPTED),
    }


def test_the_jobs_list_and_its_live_cells_say_why_a_job_stops(client_for, stopping) -> None:
    client = client_for("alice")
    html = client.get("/jobs/").content.decode()
    ids = ",".join(str(job.pk) for job in stopping.values())
    live = client.get(f"/ui/jobs.json?ids={ids}").json()["html"]
    for label, job in stopping.items():
        words = label[:1].upper() + label[1:]
        cell = re.search(rf'data-live-html="job-state-{job.pk}">(.*?)</td>', html, flags=re.S)
        assert cell is not None
        assert f">{words}</span>" in cell.group(1)
        assert 'data-state="preempting"' in cell.group(1)  # the state (and its colour) unchanged
        assert f">{words}</span>" in live[f"job-state-{job.pk}"]


def test_the_job_page_badge_and_timeline_say_why_it_stops(client_for, stopping) -> None:
    client = client_for("alice")
    for label, job in stopping.items():
        words = label[:1].upper() + label[1:]
        html = client.get(f"/jobs/{job.pk}/").content.decode()
        badge = re.search(r'id="job-state"[^>]*>(.*?)</span></span>', html, flags=re.S)
        assert badge is not None and badge.group(1).endswith(f">{words}")
        figure = re.search(r'"categoryarray":\s*(\[[^\]]*\])', html)
        assert figure is not None
        assert words in json.loads(figure.group(1))
        if label != "preempting":
            assert "Preempting" not in json.loads(figure.group(1))


def test_the_node_page_says_why_the_jobs_on_it_stop(client_for, stopping) -> None:
    client = client_for("alice")
    for label, job in stopping.items():
        words = label[:1].upper() + label[1:]
        node = Allocation.objects.filter(job=job).values_list("gpus__node__name", flat=True).first()
        html = client.get(f"/nodes/{node}/").content.decode()
        row = re.search(rf'href="/jobs/{job.pk}/">.*?</tr>', html, flags=re.S)
        assert row is not None
        assert f'data-state="preempting" style="background:#e8590c">{words}</span>' in row.group(0)
