"""In Chromium: a submit form wrong in several ways says every one of them on its field at the
first Submit, in the server's words, and submits nothing. It used to name only the first stage
of the server's checks (a CPU count below 0), and the array, the runtime limit beyond the
class's maximum and the dependency on a job that does not exist one round after another."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_form_wrong_in_four_ways_says_all_four_on_their_fields_at_once(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "sweep")
    page.fill("[data-field=gpus]", "1")
    page.fill("[data-field=cpus_per_gpu]", "-1")
    page.fill("[data-field=runtime_limit_s]", "1000")  # hours: beyond the class's maximum
    page.fill("[data-field=array]", "5-1")
    page.get_by_label("Runs after").fill("afterok:999999")
    page.click("#submit-job button[type=submit]")

    said = {
        "cpus_per_gpu": "host CPUs per GPU: 0 (none asked for) or more",
        "runtime_limit_s": "is beyond the maximum of priority class",
        "array": "range 5-1 ends before it starts",
        "dependencies": "no job 999999 you can see",
    }
    for field, words in said.items():
        expect(page.locator(f"[data-error-for={field}]")).to_contain_text(words, timeout=LIVE_TIMEOUT_MS)
        expect(page.locator(f"[data-error-for={field}]")).to_be_visible()
    alice.screenshot("submit-form-every-error")
    assert page.url.endswith("/jobs/")
    assert not Job.objects.filter(name="sweep").exists()
    alice.expect_refusal("/api/v1/job-arrays/", 400)  # the submit's refusal, which the test provoked
