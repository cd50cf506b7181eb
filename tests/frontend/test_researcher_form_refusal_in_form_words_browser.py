"""In Chromium: the sentence under the submit form and the Change form says each field at fault
by the form's own label, in the form's own units, as the words on the field do. Until 7 Dec it
repeated the API's sentence: "runtime_limit_s: 720000 s (8.3 days) is beyond the maximum of
priority class 'research' (604800 s), which is 7 days. dependencies.1.job: no job 99999 you can
see." under a form that asks *Runtime limit (hours)* and *Runs after*."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import ANSWER_TIMEOUT_MS, LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

API_WORDS = ("runtime_limit_s", "dependencies.1", "dependencies:", "604800 s", "720000 s", "days", "Invalid request")


def _most_hours(job: Job) -> str:
    hours = job.priority_class.max_runtime_limit_s / 3600
    assert hours == int(hours), "the fixture's class maximum is a whole number of hours"
    return f"{int(hours)} h"


def test_the_submit_forms_sentence_names_its_labels_in_its_units(session: Any) -> None:  # noqa: F811
    earlier = submit(user("alice"), SubmitRequest(name="earlier", gpus=1)).job
    most = _most_hours(earlier)
    cls = earlier.priority_class.name
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "too-long")
    page.fill("[data-field=runtime_limit_s]", "200")  # hours
    page.get_by_label("Runs after").fill(f"afterok:{earlier.pk},afterok:999999")
    page.fill("[data-field=gpus]", "1")
    verdict = page.locator("#submit-job [data-verdict]")
    runtime = page.locator("[data-error-for=runtime_limit_s]")
    sentence = (f"Fix the fields marked: Runtime limit: 200 h is beyond the maximum of priority class '{cls}' "
                f"({most}); Runs after: no job 999999 you can see.")
    # the live check, then the submit's 400: the same words
    expect(verdict).to_have_text(sentence, timeout=LIVE_TIMEOUT_MS)
    expect(runtime).to_have_text(f"200 h is beyond the maximum of priority class '{cls}' ({most})")
    page.click("#submit-job button[type=submit]")
    expect(verdict).not_to_have_text("Submitting…", timeout=ANSWER_TIMEOUT_MS)
    expect(verdict).to_have_text(sentence)
    expect(runtime).to_have_text(f"200 h is beyond the maximum of priority class '{cls}' ({most})")
    for words in API_WORDS:
        assert words not in verdict.inner_text()

    # the shape this fleet can never run is said first, the other fields after it, by their labels
    page.fill("[data-field=gpus_per_node]", "16")
    page.fill("[data-field=gpus]", "16")
    expect(verdict).to_contain_text("This job can never run on this fleet: ", timeout=LIVE_TIMEOUT_MS)
    expect(verdict).to_contain_text(". Fix the other fields marked too: Runtime limit: 200 h is beyond the maximum "
                                    f"of priority class '{cls}' ({most}); Runs after: no job 999999 you can see.")
    assert "gpus_per_node" not in verdict.inner_text()
    assert not Job.objects.filter(name="too-long").exists()
    alice.expect_refusal("/api/v1/jobs/", 400)
    assert alice.errors == []


def test_the_change_forms_sentence_names_its_labels_in_its_units(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="waiting", gpus=1, runtime_limit_s=4 * 3600, hold=True)).job
    most = _most_hours(job)
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    page.fill("#change-job [data-field=runtime_limit_s]", "200")  # hours, as the label says
    page.click("#change-job button[type=submit]")
    verdict = page.locator("#change-result")
    expect(verdict).to_have_text(f"Fix the fields marked: Runtime limit: 200 h is beyond the maximum of priority "
                                 f"class '{job.priority_class.name}' ({most}).", timeout=ANSWER_TIMEOUT_MS)
    expect(page.locator("#change-job [data-error-for=runtime_limit_s]")).to_have_text(
        f"200 h is beyond the maximum of priority class '{job.priority_class.name}' ({most})")
    job.refresh_from_db()
    assert job.runtime_limit_s == 4 * 3600
    alice.expect_refusal(f"/api/v1/jobs/{job.pk}/", 400)
    assert alice.errors == []


def test_the_submit_forms_errors_say_its_fields_by_their_labels(session: Any) -> None:  # noqa: F811
    """The API's words name its fields ("min_gpus 8 is more than gpus 4", "… its
    max_runtime_limit_s"): under the form each is said as the form's label says it, the labels
    being the one home of those words; the API keeps its names."""
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "elastic")
    page.fill("[data-field=min_gpus]", "8")
    page.fill("[data-field=gpus]", "4")
    verdict = page.locator("#submit-job [data-verdict]")
    elastic = page.locator("[data-error-for=min_gpus]")
    expect(elastic).to_have_text("Elastic: min GPUs 8 is more than GPUs 4", timeout=LIVE_TIMEOUT_MS)
    expect(verdict).to_have_text("Fix the fields marked: Elastic: min GPUs 8 is more than GPUs 4.")  # not labelled twice

    page.fill("[data-field=min_gpus]", "")
    page.fill("[data-field=runtime_limit_s]", "300000000")  # hours: more than any limit
    runtime = page.locator("[data-error-for=runtime_limit_s]")
    expect(runtime).to_have_text("more than any runtime limit (at most 31,709 years); each priority class allows "
                                 "at most its maximum runtime limit", timeout=LIVE_TIMEOUT_MS)
    page.click("#submit-job button[type=submit]")
    expect(verdict).not_to_have_text("Submitting…", timeout=ANSWER_TIMEOUT_MS)
    expect(verdict).to_contain_text("Runtime limit: more than any runtime limit")
    for words in ("_gpus", "gpus ", "_s", "max_runtime"):
        assert words not in verdict.inner_text() + elastic.inner_text() + runtime.inner_text()
    assert not Job.objects.filter(name="elastic").exists()
    alice.expect_refusal("/api/v1/jobs/", 400)
    assert alice.errors == []
