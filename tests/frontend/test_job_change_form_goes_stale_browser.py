"""In Chromium: a waiting job's Change form, left open while the job starts, says that the job
moved on and sends nothing; what was typed stays.

Found walking through the demo as a researcher (5 Dec): the panel went on saying "While it
waits…" and offering the shape fields after the job had started, and a change sent from it was
refused for fields a running job cannot change."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.models import AllocationGpu, Node
from controlplane.services.jobs import SubmitRequest, submit
from tests.controlplane.job_runs_story import bind_at
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_waiting_jobs_change_form_says_so_once_the_job_has_started(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="soon-running", gpus=8)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    stale = page.locator("#change-stale")
    expect(stale).to_be_hidden()
    page.fill('#change-job [data-field="gpus"]', "4")

    busy = AllocationGpu.objects.filter(live=True).values("node_id")
    node = Node.objects.filter(state="ready", gpu_type__name="H100-80GB").exclude(pk__in=busy).order_by("name")[0]
    bind_at(job, [(node, range(8), "")], at=timezone.now())
    page.evaluate("QM.poll()")

    expect(stale).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    expect(stale).to_contain_text("The job is no longer pending (it is running now)")
    expect(page.locator('#change-job button[type="submit"]')).to_be_disabled()
    expect(page.locator('#change-job [data-field="gpus"]')).to_have_value("4")
    alice.screenshot("job-change-form-stale")
