"""In Chromium: the jobs page's submit form has a "Runs after" field taking `qm submit -d`'s
text. A researcher submits a job to run after another; its page says "Runs after" that job. A
bad dependency (bad syntax, a job she cannot see) is said on the field, in the server's words
(the text is parsed once, server-side, by the parser qm uses), and nothing is submitted."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job, JobDependency
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_researcher_submits_a_job_that_runs_after_another_and_sees_it_on_its_page(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    pre = submit(user("alice"), SubmitRequest(name="preprocess", gpus=1)).job
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "train-after")
    page.fill("[data-field=gpus]", "1")
    page.get_by_label("Runs after").fill(f"afterok:{pre.pk}")

    expect(page.locator("[data-verdict]")).to_contain_text("This fleet can run 1 GPU", timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("[data-error-for=dependencies]")).to_be_hidden()
    page.click("#submit-job button[type=submit]")
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    page.wait_for_selector("body[data-charts-ready=true]")

    job = Job.objects.get(name="train-after")
    assert list(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition")) == [(pre.pk, "afterok")]
    expect(page.locator("#runs-after")).to_contain_text(f"Runs after: job {pre.pk} (preprocess) succeeds (now pending)")
    expect(page.locator("#runs-after a")).to_have_attribute("href", f"/jobs/{pre.pk}/")
    alice.screenshot("submit-form-runs-after")


def test_a_bad_dependency_is_said_on_the_field_and_nothing_is_submitted(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    theirs = submit(user("bob"), SubmitRequest(name="bobs", gpus=1)).job
    alice.open("/jobs/")
    page = alice.page
    field = page.get_by_label("Runs after")
    error = page.locator("[data-error-for=dependencies]")
    page.fill("[data-field=name]", "bad-deps")
    page.fill("[data-field=gpus]", "1")

    # Bad syntax: the live check says so on the field.
    field.fill("afterok:abc")
    expect(error).to_have_text("afterok:abc: 'abc' is not a job id (a number) or a job array's id",
                               timeout=LIVE_TIMEOUT_MS)
    expect(field).to_have_attribute("aria-invalid", "true")

    # Another team's job: no job she can see, on the same field, live and on submit.
    field.fill(f"afterany:{theirs.pk}")
    expect(error).to_have_text(f"no job {theirs.pk} you can see", timeout=LIVE_TIMEOUT_MS)
    page.click("#submit-job button[type=submit]")
    expect(page.locator("[data-verdict]")).to_contain_text(f"no job {theirs.pk} you can see", timeout=LIVE_TIMEOUT_MS)
    expect(error).to_have_text(f"no job {theirs.pk} you can see")
    alice.screenshot("submit-form-runs-after-refused")
    assert page.url.endswith("/jobs/")
    assert not Job.objects.filter(name="bad-deps").exists()
    alice.expect_refusal("/api/v1/jobs/", 400)  # the submit's refusal, which the test provoked
