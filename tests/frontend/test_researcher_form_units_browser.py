"""In Chromium: the submit form's runtime limit is typed in hours and its checkpoint interval in
minutes, but the API bounds them in seconds: 0 hours was refused under *Runtime limit (hours)*
with the API's bare "Ensure this value is greater than or equal to 1.", which reads as "at least
one hour" (a quarter of an hour is taken). A bound in seconds is said in the field's own unit
(its seconds kept beside it when the unit does not say it whole), on the field and in the
sentence under the form, which names the field by its label (7 Dec: it said "runtime_limit_s:")."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_bound_in_seconds_is_said_in_the_fields_unit(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "units")
    page.fill("[data-field=gpus]", "1")
    page.fill("[data-field=runtime_limit_s]", "0")          # hours
    page.fill("[data-field=checkpoint_interval_s]", "0")    # minutes
    runtime = page.locator("[data-error-for=runtime_limit_s]")
    checkpoint = page.locator("[data-error-for=checkpoint_interval_s]")
    verdict = page.locator("#submit-job [data-verdict]")
    # the live check, then the submit: the same words on the field, and in the sentence under the
    # form by the field's label (it said the bare "runtime_limit_s: Ensure this value is greater
    # than or equal to 1." beside the field's "1 s (0.000278 hours)" until 6 Dec, and named the
    # field "runtime_limit_s:" until 7 Dec; "at least 0.000278 h (1 s)" for an hour's fraction
    # until the evening of 7 Dec)
    for _ in range(2):
        expect(runtime).to_contain_text("a runtime limit is at least 1 s", timeout=LIVE_TIMEOUT_MS)
        expect(checkpoint).to_contain_text("a checkpoint interval is at least 1 s", timeout=LIVE_TIMEOUT_MS)
        expect(verdict).to_contain_text("Runtime limit: a runtime limit is at least 1 s")
        expect(verdict).to_contain_text("Checkpoint every: a checkpoint interval is at least 1 s")
        expect(verdict).not_to_contain_text("_s:")
        expect(verdict).not_to_contain_text("0.000278")
        page.click("#submit-job button[type=submit]")
        expect(verdict).not_to_have_text("Submitting…", timeout=LIVE_TIMEOUT_MS)
    # the class's maximum too, in hours: not "3600000 s (41.7 days) … (604800 s), which is 7 days"
    page.fill("[data-field=runtime_limit_s]", "1000")
    page.fill("[data-field=checkpoint_interval_s]", "5")
    expect(runtime).to_contain_text("1000 h is beyond the maximum of priority class", timeout=LIVE_TIMEOUT_MS)
    expect(runtime).not_to_contain_text(re.compile(r"\d s\b"))
    expect(runtime).not_to_contain_text("days")
    # Whole: the API's words for the amount ("(41 d 16 h)") go with its seconds.
    expect(runtime).to_have_text("1000 h is beyond the maximum of priority class 'research' (168 h)")
    assert not Job.objects.filter(name="units").exists()
    alice.expect_refusal("/api/v1/jobs/", 400)
    assert alice.errors == []


@pytest.mark.parametrize(("typed", "said"), [
    # whole hours of more than three figures: "1230 h (1230 h (4442400 s))" until 8 Dec, the
    # amount rounded to three figures and its kept seconds read again as an amount
    ("1234", "1234 h"),
    ("99999", "99999 h"),
    ("1000.5", "1000.5 h"),
    # not whole: two decimals and its seconds, once
    ("1234.567", "1234.57 h (4444441 s)"),
])
def test_an_amount_of_many_hours_is_said_as_typed(session: Any, typed: str, said: str) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "long")
    page.fill("[data-field=gpus]", "1")
    page.fill("[data-field=runtime_limit_s]", typed)
    runtime = page.locator("[data-error-for=runtime_limit_s]")
    expect(runtime).to_have_text(f"{said} is beyond the maximum of priority class 'research' (168 h)",
                                 timeout=LIVE_TIMEOUT_MS)
    page.click("#submit-job button[type=submit]")
    expect(page.locator("#submit-job [data-verdict]")).to_contain_text(
        f"Runtime limit: {said} is beyond the maximum", timeout=LIVE_TIMEOUT_MS)
    assert not Job.objects.filter(name="long").exists()
    alice.expect_refusal("/api/v1/jobs/", 400)
    assert alice.errors == []
