"""A priority class's maximum runtime limit lowered under the limits of its unfinished jobs: taken,
and said, in the API's answer and on the admin's page.

Found on the demo: batch's max_runtime_limit_s lowered from 3 days to 1 hour while a job of it
waited with a 2-hour limit. The change answered 200 with `"warnings": []` and the admin's page
said only "changed successfully"; the job kept its 2 hours (a class's maximum is checked when a
job is submitted or changed, services/jobs.runtime_limit_problem), so the class's new maximum
did not hold for work already in line, and the next change of that job's shape was refused for
a runtime limit its submitter never touched. As Slurm's QOS MaxWall and the grace period here
(a stop keeps the grace it was given), the change applies from now on: the admin is told which
jobs it does not reach, and how to bring them under it."""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import PriorityClass
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"
DAY = 86400


@pytest.fixture
def research_jobs(fleet) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Research (max 7 days) has a running job of 3 days, a waiting one of 2 days, a waiting
    one of 2 hours and an ended one of 7 days."""
    now = timezone.now()
    made = {
        "running": f.make_job(fleet.ml, fleet.research, state=JobState.RUNNING, started_at=now, runtime_limit_s=3 * DAY),
        "waiting": f.make_job(fleet.ml, fleet.research, runtime_limit_s=2 * DAY),
        "short": f.make_job(fleet.ml, fleet.research, runtime_limit_s=2 * 3600),
        "ended": f.make_job(fleet.ml, fleet.research, state=JobState.SUCCEEDED, started_at=now, finished_at=now,
                            runtime_limit_s=7 * DAY),
    }
    return {name: job.pk for name, job in made.items()}


def _said(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "runtime limit beyond" in w]


def test_lowering_the_maximum_under_unfinished_jobs_is_taken_and_said(fleet, admin, research_jobs) -> None:
    r = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/",
                    {"max_runtime_limit_s": DAY, "default_runtime_limit_s": 3600}, format="json")

    assert r.status_code == 200, r.json()
    assert PriorityClass.objects.get(pk=fleet.research.pk).max_runtime_limit_s == DAY
    running, waiting = research_jobs["running"], research_jobs["waiting"]
    assert _said(r.json()["warnings"]) == [
        f"2 jobs of class research have a runtime limit beyond its new maximum of 1 d (86400 s): job {running} "
        f"(running, 3 d), job {waiting} (waiting, 2 d). They keep their limits: a class's maximum is checked "
        "when a job is submitted or changed, not while it waits or runs. To hold them to it, lower their "
        "runtime_limit_s (PATCH jobs/{id}/, qm update JOB --time) or cancel them."]


def test_a_maximum_all_unfinished_jobs_fit_says_nothing(fleet, admin, research_jobs) -> None:
    r = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/", {"max_runtime_limit_s": 3 * DAY}, format="json")

    assert r.status_code == 200 and _said(r.json()["warnings"]) == [], r.json()


def test_a_change_that_leaves_the_maximum_says_nothing_and_a_read_neither(fleet, admin, research_jobs) -> None:
    type(fleet.research).objects.filter(pk=fleet.research.pk).update(max_runtime_limit_s=DAY,
                                                                     default_runtime_limit_s=3600)

    r = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/", {"grace_period_s": 60}, format="json")

    assert r.status_code == 200 and _said(r.json()["warnings"]) == [], r.json()
    assert _said(admin.get(f"{J}/priority-classes/{fleet.research.pk}/").json()["warnings"]) == []


def test_the_admin_page_says_it_too(fleet, research_jobs) -> None:
    f.make_user("boss", superuser=True)
    browser = Client()
    assert browser.login(username="boss", password="boss")
    path = f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/"
    form = {**f.admin_change_form(browser.get(path)), "max_runtime_limit_s": DAY, "default_runtime_limit_s": 3600}

    r = browser.post(path, {k: v for k, v in form.items() if v is not False}, follow=True)

    assert r.status_code == 200
    assert PriorityClass.objects.get(pk=fleet.research.pk).max_runtime_limit_s == DAY
    said = _said([str(m) for m in get_messages(r.wsgi_request) if m.level_tag == "warning"])
    assert len(said) == 1 and said[0].startswith("2 jobs of class research have a runtime limit beyond its new "
                                                 "maximum of 1 d (86400 s)"), said


def test_many_jobs_are_counted_and_the_first_named(fleet, admin) -> None:
    for _ in range(7):
        f.make_job(fleet.ml, fleet.research, runtime_limit_s=2 * DAY)

    r = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/",
                    {"max_runtime_limit_s": DAY, "default_runtime_limit_s": 3600}, format="json")

    [said] = _said(r.json()["warnings"])
    assert said.startswith("7 jobs of class research have a runtime limit beyond")
    assert said.count("(waiting, 2 d)") == 5 and "and 2 more." in said


def test_a_limit_just_beyond_the_maximum_is_said_exactly(fleet, admin) -> None:
    job = f.make_job(fleet.ml, fleet.research, runtime_limit_s=610)

    r = admin.patch(f"{J}/priority-classes/{fleet.research.pk}/",
                    {"max_runtime_limit_s": 600, "default_runtime_limit_s": 600}, format="json")

    [said] = _said(r.json()["warnings"])
    assert said.startswith(f"1 job of class research has a runtime limit beyond its new maximum of 10 min (600 s): "
                           f"job {job.pk} (waiting, 10 min 10 s). It keeps its limit:"), said
