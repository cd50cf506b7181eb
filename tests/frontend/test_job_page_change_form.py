"""The job page's Change form (PATCH jobs/{id}/, as `qm update`) offers what the service lets
change on the job as it stands: the lot while it waits, only the name and runtime limit once it
runs, nothing once it has ended or to a user who may not change it. A held job's page says its
hold's reason. The live refresh carries the page's head and shape, which a change alters."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services import holds

pytestmark = pytest.mark.django_db


def _form_fields(page: str) -> list[str]:
    form = page[page.index('<form id="change-job"'):page.index("</form>", page.index('<form id="change-job"'))]
    return re.findall(r'data-field="([a-z_]+)"', form)


def test_a_waiting_jobs_page_offers_every_field_a_waiting_job_may_change(client_for, submit_as):
    job = submit_as("alice", name="train", gpus=8, runtime_limit_s=5400, priority_class="batch")

    page = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert f'data-job-url="/api/v1/jobs/{job.pk}/"' in page
    assert sorted(_form_fields(page)) == sorted(holds.CHANGEABLE_WHILE_WAITING)
    assert 'data-field="runtime_limit_s" data-kind="hours" data-empty="null" min="0" step="any" value="1.5"' in page
    assert '<option value="batch" data-teams="vision" selected>' in page
    assert 'name="gpus" data-field="gpus" data-kind="int" min="1" value="8"' in page


def test_a_running_jobs_page_offers_only_its_name_and_runtime_limit(client_for, submit_as):
    job = submit_as("alice", name="train", gpus=8)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=timezone.now())

    page = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert _form_fields(page) == ["name", "runtime_limit_s"]
    assert "only its name and a lower runtime limit can change now" in page


def test_no_change_form_for_an_ended_job_and_no_page_for_those_who_may_not_change_it(client_for, submit_as):
    waiting = submit_as("alice", name="waiting", gpus=8)
    ended = submit_as("alice", name="ended", gpus=8)
    Job.objects.filter(pk=ended.pk).update(state=JobState.SUCCEEDED, finished_at=timezone.now())

    assert 'id="change-job"' not in client_for("alice").get(f"/jobs/{ended.pk}/").content.decode()
    # Reading a job and changing it go together (access.may_submit_for): another team's member
    # and finance get no page, and PATCH answers them as it does (404), changing nothing.
    for name in ("bob", "finn"):
        client = client_for(name)
        assert client.get(f"/jobs/{waiting.pk}/").status_code == 404
        r = client.patch(f"/api/v1/jobs/{waiting.pk}/", {"gpus": 16}, content_type="application/json")
        assert r.status_code in (403, 404), r.content[:300]
    assert Job.objects.get(pk=waiting.pk).gpus == 8


def test_a_held_jobs_page_says_its_reason(client_for, submit_as):
    job = submit_as("alice", name="train", gpus=8)
    holds.hold(get_user_model().objects.get(username="alice"), job.pk, reason="waiting for dataset v3")
    client = client_for("alice")

    page = client.get(f"/jobs/{job.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]

    for html in (page, live["job-status"]):
        assert '<p id="hold-reason"><strong>Reason given:</strong> waiting for dataset v3</p>' in html
        assert "Held by alice: waiting for dataset v3 — until it is released" in html
    assert f'<h1 id="job-title">Job {job.pk}: train</h1>' in live["job-head"]
    assert 'id="runtime-limit"' in live["job-shape"]
