"""In Chromium: the submit form's live check marks every field at fault at once, before any
Submit, in the words the submit would use. It stopped at its first failing stage: a shape that
can never run hid the runtime limit beyond the class's maximum and the dependency on a job that
does not exist, each found one fix (or one Submit) later. Fixing one field takes its mark away
and leaves the others'."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_live_check_marks_three_fields_of_three_stages_at_once(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "too-wide")
    page.get_by_label("Runs after").fill("afterok:999999")
    page.fill("[data-field=runtime_limit_s]", "1000")  # hours: beyond the class's maximum
    page.fill("[data-field=gpus_per_node]", "16")
    page.fill("[data-field=gpus]", "16")  # the check starts once GPUs holds a number

    said = {
        "gpus_per_node": "the largest node has 8",
        "runtime_limit_s": "is beyond the maximum of priority class",
        "dependencies": "no job 999999 you can see",
    }
    for field, words in said.items():
        expect(page.locator(f"[data-error-for={field}]")).to_contain_text(words, timeout=LIVE_TIMEOUT_MS)
        expect(page.locator(f"[data-error-for={field}]")).to_be_visible()
    for field in ("gpus_per_node", "runtime_limit_s"):
        expect(page.locator(f"[data-field={field}]")).to_have_attribute("aria-invalid", "true")
    verdict = page.locator("[data-verdict]")
    expect(verdict).to_contain_text("This job can never run on this fleet")
    expect(verdict).to_contain_text("Fix the other fields marked too")
    alice.screenshot("submit-form-live-check-every-fault")

    # One fixed: its mark goes, the other two stay, still before any Submit.
    page.fill("[data-field=gpus_per_node]", "8")
    expect(page.locator("[data-error-for=gpus_per_node]")).to_be_hidden(timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("[data-field=gpus_per_node]")).not_to_have_attribute("aria-invalid", "true")
    for field in ("runtime_limit_s", "dependencies"):
        expect(page.locator(f"[data-error-for={field}]")).to_contain_text(said[field])
    expect(verdict).to_contain_text("Fix the fields marked")
    expect(verdict).not_to_contain_text("can never run")
    assert page.url.endswith("/jobs/")
    assert not Job.objects.filter(name="too-wide").exists()
