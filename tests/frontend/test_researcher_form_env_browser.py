"""In Chromium: the submit form says a job's environment. Its Environment box (one NAME=value a
line, as `qm submit --env`) goes to the API as typed; a line that says no variable is marked on
the box before any Submit, in the submit's words; the job's page shows what it was given. Before,
the form had every field of a submit but `env` (docs/dashboards.md said "Every field"), and the
job page never showed a job's environment."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_form_submits_an_environment_and_the_job_page_shows_it(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    alice.open("/jobs/")
    page = alice.page
    page.fill("[data-field=name]", "with-env")
    page.fill("[data-field=gpus]", "1")
    env = page.locator("[data-field=env]")
    env.fill("WANDB_PROJECT=sweeps\nLR")
    error = page.locator("[data-error-for=env]")
    expect(error).to_have_text("line 2 ('LR') is not NAME=value: one variable a line, as WANDB_PROJECT=sweeps",
                               timeout=LIVE_TIMEOUT_MS)
    expect(env).to_have_attribute("aria-invalid", "true")
    env.fill("WANDB_PROJECT=sweeps\nARGS=--lr 3e-4 --warmup=100")
    expect(error).to_be_hidden(timeout=LIVE_TIMEOUT_MS)
    page.click("#submit-job button[type=submit]")
    page.wait_for_url("**/jobs/*/", timeout=LIVE_TIMEOUT_MS)
    job = Job.objects.get(name="with-env")
    assert job.env == {"WANDB_PROJECT": "sweeps", "ARGS": "--lr 3e-4 --warmup=100"}
    expect(page.locator("#job-env")).to_have_text("ARGS=--lr 3e-4 --warmup=100 WANDB_PROJECT=sweeps")
    assert alice.errors == []
