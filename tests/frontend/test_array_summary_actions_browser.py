"""In Chromium: a job array's summary on the Jobs page (`?array_id=`) offers what `scancel
ARRAY` and `scontrol hold/release ARRAY` do, through the API's job-arrays actions. It offered
nothing: a researcher who submitted a 100-task sweep from the form could stop it only one task
page at a time. The summary's counts follow what the buttons did, without a reload."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _sweep(tasks: int) -> str:
    """An array of `tasks` tasks that wait (no scheduling loop runs here): its id."""
    return str(submit(user("alice"), SubmitRequest(name="sweep", gpus=1, array=f"0-{tasks - 1}")).array_id)


def test_a_researcher_holds_releases_and_cancels_an_array_from_its_summary(session: Any) -> None:  # noqa: F811
    array_id = _sweep(3)
    tab = session("alice")
    tab.open(f"/jobs/?array_id={array_id}")
    page = tab.page
    notice = page.locator("#action-result")
    summary = page.locator("[data-live-html=array-summary]")
    expect(summary).to_have_text("Pending 3")

    tab.act("#array-hold")
    expect(notice).to_contain_text("3 held")
    assert set(Job.objects.filter(array_id=array_id).values_list("hold", flat=True)) == {"user"}

    tab.act("#array-release")
    expect(notice).to_contain_text("3 released")

    tab.act("#array-cancel")
    expect(notice).to_have_text(f"Array {array_id} (sweep, 3 tasks): 3 cancelled, 0 stopping.")
    expect(summary).to_have_text("Cancelled 3")  # the counts follow, no reload
    assert set(Job.objects.filter(array_id=array_id).values_list("state", flat=True)) == {JobState.CANCELLED}
    assert page.locator("#array-cancel").count() == 1  # the page is the one it was: no navigation
    assert tab.errors == []


def test_a_reader_who_may_not_act_on_the_array_is_offered_no_button(session: Any) -> None:  # noqa: F811
    array_id = _sweep(2)
    tab = session("admin")  # an admin may act on any array: sees them
    tab.open(f"/jobs/?array_id={array_id}")
    expect(tab.page.locator("#array-cancel")).to_be_visible()
    bob = session("bob")  # another team's researcher does not see the array at all
    bob.open(f"/jobs/?array_id={array_id}")
    expect(bob.page.locator("#array-cancel")).to_have_count(0)
    assert tab.errors == [] and bob.errors == []


def test_the_summary_says_how_many_waiting_tasks_are_held(session: Any) -> None:  # noqa: F811
    """Held tasks are pending, out of the queue: the summary read "Pending 3" before and after a
    hold, beside a Release button, and only each row said "held"."""
    array_id = _sweep(3)
    Job.objects.filter(array_id=array_id, array_index__lt=2).update(hold="user")
    tab = session("alice")
    tab.open(f"/jobs/?array_id={array_id}")
    page = tab.page
    summary = page.locator("[data-live-html=array-summary]")
    expect(summary).to_have_text("Pending 3 (2 held)")

    tab.act("#array-release")
    expect(summary).to_have_text("Pending 3")  # the live update says it too
    assert tab.errors == []


def test_cancelling_an_array_names_the_jobs_it_took_with_it(session: Any) -> None:  # noqa: F811
    """The array's cancel cancels the jobs that waited on its tasks to succeed, as a single job's
    does, and its question and notice name them as a single job's do (it said only "2 cancelled,
    0 stopping.", and asked without a word of them)."""
    sweep = submit(user("alice"), SubmitRequest(name="sweep", gpus=1, array="0-1"))
    array_id = str(sweep.array_id)
    merge = submit(user("alice"), SubmitRequest(name="merge", gpus=1, dependencies=({"job": sweep.job.pk},))).job
    tab = session("alice")
    tab.open(f"/jobs/?array_id={array_id}")
    page = tab.page
    asked: list[str] = []
    page.on("dialog", lambda dialog: asked.append(dialog.message))  # the session's own handler accepts it
    tab.act("#array-cancel")
    expect(page.locator("#action-result")).to_have_text(
        f"Array {array_id} (sweep, 2 tasks): 2 cancelled, 0 stopping. With them 1 job that waited on its tasks was "
        f"cancelled, its dependency never to be met now: job {merge.pk} (merge).")
    assert asked == [f"Cancel array {array_id} (sweep)? Every task still waiting is cancelled, every running one "
                     "stopped (its processes get their grace period); ended tasks are left as they ended. 1 job "
                     "waiting on its tasks (afterok) is cancelled with them, its dependency never to be met, and so "
                     f"is any job waiting on it: job {merge.pk} (merge)."]
    assert Job.objects.get(pk=merge.pk).state == JobState.CANCELLED
    assert tab.errors == []
