"""In Chromium: the notice an action leaves on the job page ("Job 12 is stopping: its processes
get 30 s to exit.") speaks of the job as the action left it. Once the job moves on (its
processes exited: Cancelled) the live update takes it away; it stood in green above the
Cancelled badge until the page was reloaded. A notice the job's state still bears out stays."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services import transitions
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)
from tests.frontend.test_researcher_requeue_browser import _running

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_stopping_notice_goes_once_the_job_has_stopped(session: Any) -> None:  # noqa: F811
    job, allocation = _running("cancel-me")
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    notice = page.locator("#action-result")

    alice.act("#cancel-job")

    grace = job.priority_class.grace_period_s
    expect(notice).to_have_text(f"Job {job.pk} is stopping: its processes get {grace} s to exit.")
    expect(page.locator("#job-state")).to_contain_text("Stopping: cancelled")
    expect(notice).to_be_visible()  # the refresh right after the action shows the state it speaks of

    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:test")
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    expect(page.locator("#job-state")).to_contain_text("Cancelled", timeout=LIVE_TIMEOUT_MS)
    expect(notice).to_be_hidden()
    assert alice.errors == []


def test_a_notice_the_state_bears_out_stays(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="hold-me", gpus=1)).job  # waits: no loop runs here
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page

    page.click("#hold-job")

    notice = page.locator("#action-result")
    expect(notice).to_contain_text(f"Job {job.pk}", timeout=LIVE_TIMEOUT_MS)
    updates = int(page.evaluate("document.body.dataset.liveUpdates || '0'"))
    page.wait_for_function(f"Number(document.body.dataset.liveUpdates || '0') > {updates}", timeout=LIVE_TIMEOUT_MS)
    expect(notice).to_be_visible()
    assert alice.errors == []
