"""The job page's Change form offers "Runs after" (the job's dependencies in Slurm's text, as
`qm update -d` takes them) while the job waits, because services/holds.changeable_now offers
`dependencies` then: prefilled with the job's dependencies as the job.updated event writes them
(dependency_text.text_of), empty when it has none; a running job's form has no such field."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from controlplane.services import holds

pytestmark = pytest.mark.django_db


def _runs_after_input(page: str) -> str | None:
    form = page[page.index('<form id="change-job"'):page.index("</form>", page.index('<form id="change-job"'))]
    found = re.search(r'<input type="text" name="dependencies" data-field="dependencies"[^>]*>', form)
    return found.group(0) if found else None


def _value(tag: str) -> str:
    return re.search(r' value="([^"]*)"', tag).group(1)


def test_the_service_offers_dependencies_only_while_the_job_waits(submit_as):
    job = submit_as("alice", name="train", gpus=8)
    assert "dependencies" in holds.changeable_now(job)
    for state in (JobState.RUNNING, JobState.PREEMPTING, JobState.SUCCEEDED, JobState.CANCELLED):
        job.state = state
        assert "dependencies" not in holds.changeable_now(job), state


def test_a_waiting_jobs_form_offers_runs_after_filled_with_its_dependencies_as_text(client_for, submit_as):
    a = submit_as("alice", name="a", gpus=8)
    b = submit_as("alice", name="b", gpus=8)
    c = submit_as("alice", name="c", gpus=8)
    # Given out of order: the text lists afterok before afterany, ids ascending.
    job = submit_as("alice", name="train", gpus=8, dependencies=(
        {"job": c.pk, "condition": "afterany"}, {"job": b.pk, "condition": "afterok"},
        {"job": a.pk, "condition": "afterok"}))
    lone = submit_as("alice", name="lone", gpus=8)
    client = client_for("alice")

    tag = _runs_after_input(client.get(f"/jobs/{job.pk}/").content.decode())
    assert tag is not None
    assert _value(tag) == f"afterok:{a.pk}:{b.pk},afterany:{c.pk}"
    assert 'data-empty="none"' in tag
    # No dependency: the field is there, empty (not "none").
    assert _value(_runs_after_input(client.get(f"/jobs/{lone.pk}/").content.decode())) == ""

    # What the form shows is what the job.updated event of a change says (one formatter).
    r = client.patch(f"/api/v1/jobs/{lone.pk}/", {"dependencies": f"afterany:{c.pk},afterok:{b.pk}:{a.pk}"},
                     content_type="application/json")
    assert r.status_code == 200, r.content[:400]
    event = Event.objects.get(job=lone, kind=EventKind.JOB_UPDATED)
    shown = _value(_runs_after_input(client.get(f"/jobs/{lone.pk}/").content.decode()))
    assert event.data["changes"]["dependencies"] == ["none", shown]
    assert shown == f"afterok:{a.pk}:{b.pk},afterany:{c.pk}"


def test_a_running_jobs_form_has_no_runs_after(client_for, submit_as):
    a = submit_as("alice", name="a", gpus=8)
    job = submit_as("alice", name="train", gpus=8, dependencies=({"job": a.pk, "condition": "afterany"},))
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=timezone.now())

    page = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert 'id="change-job"' in page and _runs_after_input(page) is None
    assert 'data-field="dependencies"' not in page
