"""The job page of a running elastic job below its maximum says why the scheduler did not grow
it (the cycle's growth note), in the page and its live refresh; a job not running says nothing."""

from __future__ import annotations

from django.utils import timezone

from controlplane.models import Job

NOTE = "Holds 8 of at most 16 GPUs: team ml's quota has no room for 8 more H100-80GB GPUs."


def test_a_running_elastic_job_page_says_why_it_is_not_growing(client_for, submit_as):
    job = submit_as("alice", name="elastic", gpus=8)
    Job.objects.filter(pk=job.pk).update(state="running", started_at=timezone.now(), min_gpus=8, max_gpus=16,
                                         growth_code="GrowthQuota", growth_note=NOTE)
    client = client_for("alice")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]
    for html in (page, live):
        assert ('<p class="why" id="growth-note">Not growing: <code>GrowthQuota</code> '
                "Holds 8 of at most 16 GPUs: team ml&#x27;s quota has no room for 8 more H100-80GB GPUs.</p>") in html
    # a stale note on a job no longer running is not shown
    Job.objects.filter(pk=job.pk).update(state="succeeded", finished_at=timezone.now())
    assert 'id="growth-note"' not in client.get(f"/jobs/{job.pk}/").content.decode()
