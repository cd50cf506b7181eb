"""In Chromium: the submit form's "Members on distinct nodes" box. Ticked for a gang of one member,
the live check marks it in the submit's words before any Submit; ticked for a gang of two members,
the job is submitted with `members_on_distinct_nodes` and its page says so in its topology; left
unticked, the gang is packed. A waiting job's Change form turns it on and off (a box sends true
or false, never the browser's "on", which the API would read as true)."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import (  # noqa: F401 (fixtures)
    ANSWER_TIMEOUT_MS,
    LIVE_TIMEOUT_MS,
    browser,
    session,
    user,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_form_submits_members_on_distinct_nodes_and_the_job_page_says_it(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "spread")
    page.fill("[data-field=gpus]", "4")
    page.fill("[data-field=gpus_per_node]", "4")
    page.check("[data-field=members_on_distinct_nodes]")
    error = page.locator("[data-error-for=members_on_distinct_nodes]")
    # The API's field names said as the form's labels say them (until 7 Dec "gpus 4 with gpus_per_node 4 …").
    expect(error).to_have_text("GPUs 4 with GPUs per node 4 is a single member, on one node; members on distinct "
                               "nodes needs at least two (GPUs more than GPUs per node)", timeout=LIVE_TIMEOUT_MS)
    page.fill("[data-field=gpus]", "8")
    expect(error).to_be_hidden(timeout=LIVE_TIMEOUT_MS)
    page.click("#submit-job button[type=submit]")
    page.wait_for_url("**/jobs/*/", timeout=LIVE_TIMEOUT_MS)
    job = Job.objects.get(name="spread")
    assert (job.gpus, job.gpus_per_node, job.members_on_distinct_nodes) == (8, 4, True)
    expect(page.locator("dt:text-is('Topology') + dd")).to_have_text("Anywhere, members on distinct nodes")
    assert alice.errors == []


def test_left_unticked_the_form_submits_a_packed_gang(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "packed")
    page.fill("[data-field=gpus]", "8")
    page.fill("[data-field=gpus_per_node]", "4")
    page.click("#submit-job button[type=submit]")
    page.wait_for_url("**/jobs/*/", timeout=LIVE_TIMEOUT_MS)
    assert Job.objects.get(name="packed").members_on_distinct_nodes is False
    expect(page.locator("dt:text-is('Topology') + dd")).to_have_text("Anywhere")
    assert alice.errors == []


def test_the_change_form_turns_it_on_and_off(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="later", gpus=8, gpus_per_node=4)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    box = page.locator("#change-job [data-field=members_on_distinct_nodes]")
    expect(box).not_to_be_checked()
    box.check()
    page.click("#change-job button[type=submit]")
    expect(page.locator("#change-result")).to_have_text(
        f"Job {job.pk} changed: members on distinct nodes no → yes.", timeout=ANSWER_TIMEOUT_MS)
    assert Job.objects.get(pk=job.pk).members_on_distinct_nodes is True
    expect(box).to_be_checked()
    box.uncheck()
    page.click("#change-job button[type=submit]")
    expect(page.locator("#change-result")).to_have_text(
        f"Job {job.pk} changed: members on distinct nodes yes → no.", timeout=ANSWER_TIMEOUT_MS)
    assert Job.objects.get(pk=job.pk).members_on_distinct_nodes is False
    assert alice.errors == []
