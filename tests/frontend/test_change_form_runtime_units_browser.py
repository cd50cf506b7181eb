"""In Chromium: the job page's Change form says a runtime limit in the largest unit that says it
exactly, in at most two decimals. A 10-minute limit read "0.166667" under *Runtime limit
(hours)* (demo walk, 5 Dec); it now reads 10 under *Runtime limit (minutes)*, and sending the
form back unchanged changes nothing, nor does what is stored change."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.choices import EventKind
from controlplane.models import Event, Job
from controlplane.services.jobs import SubmitRequest, submit
from frontend.views.jobs import limit_field
from tests.frontend.test_browser_pages import ANSWER_TIMEOUT_MS, LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("seconds, shown", [
    (4 * 3600, ("hours", "4")), (5400, ("hours", "1.5")), (900, ("hours", "0.25")), (600, ("minutes", "10")),
    (90, ("minutes", "1.5")), (601, ("seconds", "601")), (None, ("hours", "")),
])
def test_a_limit_is_said_in_the_largest_unit_that_says_it_exactly(seconds: int | None, shown: tuple[str, str]) -> None:
    field = limit_field(seconds)
    assert (field["kind"], field["value"]) == shown


def test_a_ten_minute_limit_reads_10_minutes_and_round_trips(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="quick", gpus=1, runtime_limit_s=600)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    field = page.locator("#change-job [data-field=runtime_limit_s]")
    expect(field).to_have_value("10")
    expect(page.locator("#change-job label", has=page.locator("[data-field=runtime_limit_s]"))).to_contain_text("Runtime limit (minutes)")

    page.click("#change-job button[type=submit]")  # sent back as shown: nothing to change
    expect(page.locator("#change-result")).to_contain_text("Nothing to change", timeout=ANSWER_TIMEOUT_MS)
    alice.expect_refusal(f"/api/v1/jobs/{job.pk}/", 400)

    page.fill("#change-job [data-field=runtime_limit_s]", "15")
    page.click("#change-job button[type=submit]")
    expect(page.locator("#change-result")).to_contain_text("runtime limit 10 min → 15 min", timeout=ANSWER_TIMEOUT_MS)
    expect(field).to_have_value("15", timeout=LIVE_TIMEOUT_MS)
    job.refresh_from_db()
    assert job.runtime_limit_s == 900
    assert Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).count() == 1
    assert Job.objects.filter(pk=job.pk, runtime_limit_s=900).exists()
    assert alice.errors == []
