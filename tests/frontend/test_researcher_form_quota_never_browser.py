"""In Chromium: a job the fleet could run but its team's quota never admits (96 H100s for team
vision, which may hold at most 72) is taken by the submit and then waits for ever as
CanNeverRun. The form's live check said so only in green, "This fleet can run 96 GPUs … The
submit would take it"; it now says, not in the green of a job that runs, that as asked it would
never start and why."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_live_check_says_a_job_its_quota_never_admits_would_never_start(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    verdict = page.locator("#submit-job [data-verdict]")
    page.fill("[data-field=name]", "too-big-for-vision")
    page.select_option("[data-field=gpu_types]", "H100-80GB")
    page.fill("[data-field=gpus]", "96")
    expect(verdict).to_contain_text("but as asked it would never start", timeout=LIVE_TIMEOUT_MS)
    expect(verdict).to_contain_text("team vision may hold at most 72 H100-80GB GPUs")
    expect(verdict).to_have_class("verdict warn")
    page.fill("[data-field=gpus]", "72")  # its ceiling: it can start once its quota has room
    expect(verdict).to_contain_text("The submit would take it", timeout=LIVE_TIMEOUT_MS)
    expect(verdict).not_to_contain_text("never")
    expect(verdict).to_have_class("verdict ok")
    assert alice.errors == []
