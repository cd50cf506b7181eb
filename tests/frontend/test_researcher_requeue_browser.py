"""In Chromium: a researcher requeues her running job from its page (a confirm first, as for
Cancel), with a reason; the page says it is being requeued and by whom, and once its processes
exit it says it waits again, requeued on request. "Requeue held" brings it back held, with the
Release button. A waiting job offers no Requeue button, nor a job of another team."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import JobHold, JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node
from controlplane.services import transitions
from controlplane.services.jobs import SubmitRequest, submit
from tests.controlplane.loop_fixtures import bind
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _running(name: str) -> tuple[Job, Allocation]:
    job = submit(user("alice"), SubmitRequest(name=name, gpus=1)).job
    busy = AllocationGpu.objects.filter(live=True).values("node_id")
    node = Node.objects.filter(state="ready").exclude(pk__in=busy).order_by("name").first()
    assert node is not None, "the demo fleet has an idle ready node"
    allocation = bind(job, {node: [0]})
    assert allocation is not None
    return job, allocation


def test_researcher_requeues_a_running_job_from_its_page(session: Any) -> None:  # noqa: F811
    job, allocation = _running("requeue-me")
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    button = page.locator("#requeue-job")
    expect(button).to_have_text("Requeue")
    expect(button).to_have_attribute("data-confirm", f"Requeue job {job.pk} (requeue-me)? Its processes get "
                                     f"{job.priority_class.grace_period_s} s to exit, then it goes back to the queue and "
                                     "restarts from its last checkpoint.")
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: dialogs.append(dialog.message))

    page.fill("#requeue-reason-input", "node throws XID 79")
    alice.act(button)

    grace = job.priority_class.grace_period_s
    expect(page.locator("#action-result")).to_have_text(
        f"Job {job.pk} is stopping to be requeued: its processes get {grace} s to exit, then it goes back to the "
        "queue with the same id, from its last checkpoint.")
    assert dialogs and dialogs[0].startswith(f"Requeue job {job.pk} (requeue-me)?")
    expect(page.locator("#stop-notice h3")).to_have_text("Being requeued")
    expect(page.locator("#stop-notice")).to_contain_text("Requeued by alice: node throws XID 79")
    expect(page.locator("#job-state")).to_contain_text("Stopping: requeue")
    expect(page.locator("#requeue-job")).to_have_count(0)  # no second requeue while it stops
    assert Allocation.objects.get(pk=allocation.pk).release_reason == transitions.RELEASE_REQUEUED

    # Its agent confirms the stop: it waits again, and the page says why.
    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:test")
    alice.open(f"/jobs/{job.pk}/")
    expect(page.locator("#preemption-notice h3")).to_have_text("Requeued on request")
    expect(page.locator("#preemption-notice")).to_contain_text("Requeued by alice: node throws XID 79; lost")
    expect(page.locator("#preemptions")).to_contain_text("requeued 1 more time to resize, off a lost node or on request")
    expect(page.locator("table.events")).to_contain_text("Requeued by alice: node throws XID 79")
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


def test_requeue_held_brings_it_back_held_with_a_release_button(session: Any) -> None:  # noqa: F811
    job, allocation = _running("requeue-held")
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page

    alice.act("#requeue-held-job")

    # On the page, its Release button: the API's words name the CLI's `qm release` (qm keeps them).
    expect(page.locator("#action-result")).to_contain_text(
        "goes back to the queue held (release it with its Release button)")
    expect(page.locator("#action-result")).not_to_contain_text("qm release")
    expect(page.locator("#stop-notice h3")).to_have_text("Being requeued, to come back held")
    transitions.complete_release(allocation.pk, exit_code=143, at=timezone.now(), actor="agent:test")
    alice.open(f"/jobs/{job.pk}/")
    expect(page.locator("#held-badge")).to_have_text("held")
    expect(page.locator("#held-note")).to_contain_text("Held by alice since")
    alice.act("#release-job")
    expect(page.locator("#held-badge")).to_have_count(0)
    assert Job.objects.get(pk=job.pk).hold == JobHold.NONE


def test_no_requeue_button_for_a_waiting_job(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="waits", gpus=1)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    expect(alice.page.locator("#hold-job")).to_have_count(1)
    expect(alice.page.locator("#requeue-job")).to_have_count(0)
