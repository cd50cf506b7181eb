"""In Chromium: a researcher changes a waiting job from its page's Change form (PATCH
jobs/{id}/ with the page's session and CSRF token): a value the server refuses is named next to
its field and changes nothing; a good change is applied, and the page shows the new values and
the job.updated event without a reload."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.choices import EventKind
from controlplane.models import Event, Job
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import ANSWER_TIMEOUT_MS, LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_researcher_changes_a_waiting_job_through_the_form_after_a_refused_value(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="before", gpus=8)).job  # research: up to 7 days
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    page.evaluate("window.__notReloaded = true")
    expect(page.locator("#change-job [data-field=runtime_limit_s]")).to_have_value("4")

    # Beyond the class's maximum: the server's words next to the field, in the field's hours,
    # nothing changed.
    page.fill("#change-job [data-field=runtime_limit_s]", "200")
    page.fill("#change-job [data-field=gpus]", "16")
    page.click("#change-job button[type=submit]")

    error = page.locator("#change-job [data-error-for=runtime_limit_s]")
    expect(error).to_have_text("200 h is beyond the maximum of priority class 'research' (168 h)",
                               timeout=ANSWER_TIMEOUT_MS)
    expect(page.locator("#change-job [data-field=runtime_limit_s]")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#change-result")).to_have_class("verdict error")
    alice.expect_refusal(f"/api/v1/jobs/{job.pk}/", 400)
    job.refresh_from_db()
    assert (job.gpus, job.runtime_limit_s) == (8, 4 * 3600)
    assert not Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).exists()

    # Fixed: the change goes through, the error goes, the page shows the new values.
    page.fill("#change-job [data-field=runtime_limit_s]", "2")
    page.fill("#change-job [data-field=name]", "after")
    page.click("#change-job button[type=submit]")

    expect(page.locator("#change-result")).to_have_text(
        f"Job {job.pk} changed: name before → after, runtime limit 4 h → 2 h, GPUs 8 → 16.",
        timeout=ANSWER_TIMEOUT_MS)
    expect(error).to_be_hidden()
    expect(page.locator("#job-title")).to_have_text(f"Job {job.pk}: after", timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("[data-live-html=job-gpus]")).to_contain_text("asked 16")
    expect(page.locator("#runtime-limit")).to_have_text("2 h")
    expect(page.locator("table.events")).to_contain_text(
        "Changed by alice while waiting: name before → after, runtime limit 4 h → 2 h, GPUs 8 → 16")
    expect(page.locator("#why-waiting")).to_contain_text("Changed by alice; waiting for the next scheduling cycle")
    assert page.evaluate("window.__notReloaded") is True
    job.refresh_from_db()
    assert (job.name, job.gpus, job.runtime_limit_s) == ("after", 16, 7200)

    # The form now holds what was saved: submitting it unchanged changes nothing.
    page.click("#change-job button[type=submit]")
    expect(page.locator("#change-result")).to_contain_text("Nothing to change", timeout=ANSWER_TIMEOUT_MS)
    alice.expect_refusal(f"/api/v1/jobs/{job.pk}/", 400)
    assert Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).count() == 1


def test_a_running_jobs_form_changes_its_limit_and_the_server_refuses_raising_it(session: Any) -> None:  # noqa: F811
    from django.utils import timezone

    from controlplane.choices import JobState

    job = submit(user("alice"), SubmitRequest(name="long", gpus=8)).job
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, started_at=timezone.now())
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    expect(page.locator("#change-job [data-field]")).to_have_count(2)

    page.fill("#change-job [data-field=runtime_limit_s]", "8")
    page.click("#change-job button[type=submit]")
    expect(page.locator("#change-job [data-error-for=runtime_limit_s]")).to_have_text(
        "only an admin may raise a running job's runtime limit", timeout=ANSWER_TIMEOUT_MS)
    alice.expect_refusal(f"/api/v1/jobs/{job.pk}/", 403)

    page.fill("#change-job [data-field=runtime_limit_s]", "3")
    page.click("#change-job button[type=submit]")
    expect(page.locator("#change-result")).to_have_text(
        f"Job {job.pk} changed: runtime limit 4 h → 3 h.", timeout=ANSWER_TIMEOUT_MS)
    assert Job.objects.get(pk=job.pk).runtime_limit_s == 10800


def test_researcher_holds_a_job_with_a_reason_typed_on_its_page(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="later", gpus=8)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page

    # Too long: the box takes no more than the API does (its maxlength, the API's bound: until
    # 7 Dec it took 201 characters for the API to refuse).
    page.fill("#hold-reason-input", "x" * 201)
    expect(page.locator("#hold-reason-input")).to_have_value("x" * 200)
    # Refused all the same (a control character): the server's words, nothing held, what was
    # typed stays to be fixed.
    page.fill("#hold-reason-input", "dataset\tv3")
    page.click("#hold-job")
    expect(page.locator("#action-result")).to_contain_text("reason", timeout=ANSWER_TIMEOUT_MS)
    expect(page.locator("#action-result")).to_contain_text("contains a control character (U+0009, a tab) at position 8")
    alice.expect_refusal(f"/api/v1/jobs/{job.pk}/hold/", 400)
    expect(page.locator("#hold-reason-input")).to_have_value("dataset\tv3")
    job.refresh_from_db()
    assert job.hold == ""

    page.fill("#hold-reason-input", "waiting for dataset v3")
    page.click("#hold-job")

    expect(page.locator("#held-badge")).to_have_text("held", timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#hold-reason")).to_have_text("Reason given: waiting for dataset v3")
    expect(page.locator("#why-waiting")).to_contain_text("Held by alice: waiting for dataset v3 — until it is released")
    expect(page.locator("table.events")).to_contain_text(
        "Held by alice: waiting for dataset v3 — out of the queue until released", timeout=LIVE_TIMEOUT_MS)
    job.refresh_from_db()
    assert (job.hold, job.hold_reason) == ("user", "waiting for dataset v3")
