"""In Chromium: a researcher requeues her failed job from its page (the Requeue button an ended
job of her team now offers, with the same confirm first, saying it has ended); the answer says
it is back in the queue with the same id, and after a poll the page shows it waiting again,
requeued on request, its failed run still in its events."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Job, Node
from controlplane.services import transitions
from controlplane.services.jobs import SubmitRequest, submit
from tests.controlplane.loop_fixtures import bind
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_researcher_requeues_a_failed_job_from_its_page(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="rerun-me", gpus=1)).job
    busy = AllocationGpu.objects.filter(live=True).values("node_id")
    node = Node.objects.filter(state="ready").exclude(pk__in=busy).order_by("name").first()
    assert node is not None, "the demo fleet has an idle ready node"
    allocation = bind(job, {node: [0]})
    assert allocation is not None
    assert transitions.complete_release(allocation.pk, exit_code=4, at=timezone.now(), actor="agent:test")
    assert Job.objects.get(pk=job.pk).state == JobState.FAILED

    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    button = page.locator("#requeue-job")
    expect(button).to_have_attribute("data-confirm", f"Requeue job {job.pk} (rerun-me)? It has ended (failed); it "
                                     "goes back to the queue with the same id and runs again, its earlier runs kept.")
    expect(page.locator("#cancel-job")).to_have_count(0)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))

    page.fill("#requeue-reason-input", "fixed the loader")
    alice.act(button)

    expect(page.locator("#action-result")).to_have_text(
        f"Job {job.pk} had failed (exit 4) and is back in the queue with the same id; its earlier runs are kept.")
    assert dialogs and dialogs[0].startswith(f"Requeue job {job.pk} (rerun-me)? It has ended (failed)")
    page.evaluate("QM.poll()")  # (its promise awaited: the page is refreshed when it returns)
    expect(page.locator("#job-state")).to_contain_text("Pending")
    expect(page.locator("#preemption-notice h3")).to_have_text("Requeued on request")
    expect(page.locator("#preemption-notice")).to_contain_text("Requeued by alice: fixed the loader after it failed")
    expect(page.locator("table.events")).to_contain_text("Job failed with exit code 4")
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.requeue_count == 1 and job.exit_code is None
