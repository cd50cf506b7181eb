"""A waiting job that can never run as asked is told to change its request where it is (the page's
Change form, `qm update`), which keeps its id, its age and the jobs that wait on it; the page said
"To run it, change the request: cancel it and resubmit one that fits", above the very form that
changes it, and a researcher who did so lost the job's dependents (an afterok on a cancelled job
is never met). The advice is shown on the page and in its live update."""

from __future__ import annotations

import re

import pytest

from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def _advice(html: str) -> str:
    found = re.search(r'<p class="error"[^>]*>(Waiting will not help.*?)</p>', html, flags=re.S)
    assert found is not None, html
    return found.group(1)


def test_a_job_that_can_never_run_is_told_to_change_in_place(client_for, submit_as) -> None:
    job = submit_as("bob", name="huge", gpus=96, gpu_types=("H100-80GB",))  # language: 32 nominal + 48 borrowable
    run_cycle("test")
    job.refresh_from_db()
    assert job.pending_code == "CanNeverRun" and not job.pending_resolvable

    client = client_for("bob")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]

    assert 'id="change-job"' in page  # the form the advice points to is there
    for html in (page, live):
        advice = _advice(html)
        assert "resubmit" not in advice, advice
        assert "Change" in advice and f"qm update {job.pk}" in advice, advice

    # and the advice holds: the change, as the form sends it, makes the job one that can run
    answer = client.patch(f"/api/v1/jobs/{job.pk}/", {"gpus": 64}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    run_cycle("test")
    job.refresh_from_db()
    assert job.gpus == 64 and job.pending_code != "CanNeverRun"
    assert job.state == "running" or (job.state == "pending" and job.pending_resolvable), job.state
