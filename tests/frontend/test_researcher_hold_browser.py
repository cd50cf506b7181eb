"""In Chromium: a researcher holds a waiting job from its page, sees it held there and in the
jobs list, and releases it; an admin's hold offers her no Release button and says why."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.choices import JobHold
from controlplane.models import Job
from controlplane.services import holds
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_researcher_holds_and_releases_a_waiting_job_from_its_page(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="hold-me", gpus=1)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    expect(page.locator("#held-badge")).to_have_count(0)

    alice.act("#hold-job")

    expect(page.locator("#action-result")).to_have_text(
        f"Job {job.pk} held by alice: it is out of the queue and holds nothing until released "
        "(its Release button).")
    expect(page.locator("#held-badge")).to_have_text("held")
    # The status panel was refreshed (the badge came with it) and the action's words stayed.
    expect(page.locator("#action-result")).to_contain_text(f"Job {job.pk} held by alice")
    expect(page.locator("#held-note")).to_contain_text("Held by alice since")
    expect(page.locator("#eta")).to_have_text("none while it is held")
    expect(page.locator("#hold-job")).to_have_count(0)
    assert Job.objects.get(pk=job.pk).hold == JobHold.USER

    # The jobs list says it too, on the job's row.
    alice.open("/jobs/?state=pending")
    expect(page.locator(f'[data-live-html="job-state-{job.pk}"] .badge.held')).to_have_text("held")

    alice.open(f"/jobs/{job.pk}/")
    expect(page.locator("table.events")).to_contain_text("Held by alice: out of the queue until released")
    alice.act("#release-job")

    expect(page.locator("#action-result")).to_have_text(
        f"Job {job.pk} released: it is back in the queue from the next scheduling cycle.")
    expect(page.locator("#held-badge")).to_have_count(0)
    expect(page.locator("#hold-job")).to_have_count(1)
    assert Job.objects.get(pk=job.pk).hold == JobHold.NONE
    expect(page.locator("table.events")).to_contain_text("Released by alice (was held by alice): back in the queue")


def test_an_admins_hold_offers_a_member_no_release_and_says_why(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="held-by-admin", gpus=1)).job
    holds.hold(user("admin"), job.pk)
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")

    expect(alice.page.locator("#held-badge")).to_have_text("held by admin")
    expect(alice.page.locator("#release-job")).to_have_count(0)
    expect(alice.page.locator("#held-note")).to_contain_text("an admin's hold, only an admin may release it")
