"""In Chromium: cancelling a job that other jobs wait on to succeed cancels them too (afterok can
never be met now, Slurm's kill_invalid_depend). The Cancel button asked only "Cancel job 37
(wait-me)?" and the notice said "Job 37 cancelled.", while the 10 tasks of a sweep that ran after
it went with it unsaid. The question now names the jobs the cancel takes with it, and the notice
names those it took; a job whose condition a cancel meets (afterany) is named in neither."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_cancel_question_and_notice_name_the_jobs_cancelled_with_it(session: Any) -> None:  # noqa: F811
    alice = user("alice")
    pre = submit(alice, SubmitRequest(name="preprocess", gpus=1, hold=True)).job  # waits: nothing starts it
    train = submit(alice, SubmitRequest(name="train", gpus=1, dependencies=({"job": pre.pk},))).job
    cleanup = submit(alice, SubmitRequest(name="cleanup", gpus=1,
                                          dependencies=({"job": pre.pk, "condition": "afterany"},))).job
    tab = session("alice")
    tab.open(f"/jobs/{pre.pk}/")
    page = tab.page
    asked: list[str] = []
    page.on("dialog", lambda dialog: asked.append(dialog.message))  # the session's own handler accepts it

    tab.act("#cancel-job")

    expect(page.locator("#action-result")).to_have_text(
        f"Job {pre.pk} cancelled. With it 1 job that waited on it was cancelled, its dependency never to be met "
        f"now: job {train.pk} (train).")
    assert asked == [f"Cancel job {pre.pk} (preprocess)? 1 job waiting on it (afterok) is cancelled with it, its "
                     f"dependency never to be met, and so is any job waiting on it: job {train.pk} (train)."]
    assert Job.objects.get(pk=train.pk).state == JobState.CANCELLED
    assert Job.objects.get(pk=cleanup.pk).state == JobState.PENDING
    assert tab.errors == []
