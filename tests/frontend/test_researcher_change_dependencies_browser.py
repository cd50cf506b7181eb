"""In Chromium: a researcher changes what a waiting job runs after from its page's Change form
("Runs after", `qm update -d`'s text, prefilled with the job's dependencies). A job id that does
not exist, and a cycle, are said under that field in the server's words and change nothing; a
good change is applied, and the page's "Runs after" and the reason it waits refresh without a
reload; emptying the field sends "none" and takes every dependency away."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.choices import EventKind
from controlplane.models import Event, JobDependency
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import ANSWER_TIMEOUT_MS, LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _deps(job: Any) -> list[tuple[int, str]]:
    return list(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition"))


def test_researcher_changes_what_a_waiting_job_runs_after_through_the_form(session: Any) -> None:  # noqa: F811
    pre = submit(user("alice"), SubmitRequest(name="preprocess", gpus=1, hold=True)).job
    other = submit(user("alice"), SubmitRequest(name="evaluate", gpus=1, hold=True)).job
    job = submit(user("alice"), SubmitRequest(name="train", gpus=1, dependencies=(
        {"job": pre.pk, "condition": "afterok"},))).job
    down = submit(user("alice"), SubmitRequest(name="report", gpus=1, dependencies=(
        {"job": job.pk, "condition": "afterany"},))).job
    missing = max(down.pk, other.pk) + 1000
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    page.evaluate("window.__notReloaded = true")
    field = page.locator("#change-job [data-field=dependencies]")
    error = page.locator("#change-job [data-error-for=dependencies]")
    expect(field).to_have_value(f"afterok:{pre.pk}")
    expect(page.locator("#runs-after")).to_contain_text(f"Runs after: job {pre.pk} (preprocess) succeeds")

    # A job that does not exist: the server's words under the field (dependencies.1.job), nothing changed.
    field.fill(f"afterok:{pre.pk}:{missing}")
    page.click("#change-job button[type=submit]")
    expect(error).to_have_text(f"no job {missing} you can see", timeout=ANSWER_TIMEOUT_MS)
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#change-result")).to_have_class("verdict error")
    alice.expect_refusal(f"/api/v1/jobs/{job.pk}/", 400)
    assert _deps(job) == [(pre.pk, "afterok")]

    # A cycle (report waits on train): said under the same field.
    field.fill(f"afterok:{down.pk}")
    page.click("#change-job button[type=submit]")
    expect(error).to_contain_text("a cycle", timeout=ANSWER_TIMEOUT_MS)
    alice.expect_refusal(f"/api/v1/jobs/{job.pk}/", 400)
    assert _deps(job) == [(pre.pk, "afterok")]

    # A good change: applied, the error goes, "Runs after" and why it waits refresh live.
    field.fill(f"afterany:{other.pk}")
    page.click("#change-job button[type=submit]")
    expect(page.locator("#change-result")).to_have_text(
        f"Job {job.pk} changed: dependencies afterok:{pre.pk} → afterany:{other.pk}.", timeout=ANSWER_TIMEOUT_MS)
    expect(error).to_be_hidden()
    expect(field).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#runs-after")).to_contain_text(f"Runs after: job {other.pk} (evaluate)",
                                                        timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#runs-after")).not_to_contain_text("preprocess")
    expect(page.locator("#why-waiting")).to_contain_text("WaitingForDependency")
    expect(page.locator("#why-waiting")).to_contain_text(f"job {other.pk}")
    expect(page.locator("table.events")).to_contain_text(
        f"Changed by alice while waiting: dependencies afterok:{pre.pk} → afterany:{other.pk}")
    expect(field).to_have_value(f"afterany:{other.pk}")
    assert _deps(job) == [(other.pk, "afterany")]

    # Left as it is, the field is not sent: a change of name alone says only the name.
    page.fill("#change-job [data-field=name]", "train-2")
    with page.expect_request(lambda r: r.method == "PATCH") as sent:
        page.click("#change-job button[type=submit]")
    assert sent.value.post_data_json == {"name": "train-2"}
    expect(page.locator("#change-result")).to_have_text(f"Job {job.pk} changed: name train → train-2.",
                                                        timeout=ANSWER_TIMEOUT_MS)

    # Emptied: sent as "none", every dependency goes, and so does "Runs after".
    field.fill("")
    with page.expect_request(lambda r: r.method == "PATCH") as sent:
        page.click("#change-job button[type=submit]")
    assert sent.value.post_data_json == {"dependencies": "none"}
    expect(page.locator("#change-result")).to_have_text(
        f"Job {job.pk} changed: dependencies afterany:{other.pk} → none.", timeout=ANSWER_TIMEOUT_MS)
    expect(page.locator("#runs-after")).to_have_count(0, timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#why-waiting")).to_contain_text("Changed by alice")
    expect(field).to_have_value("")
    assert _deps(job) == []
    assert Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).count() == 3
    assert page.evaluate("window.__notReloaded") is True
    alice.screenshot("change-form-runs-after")
