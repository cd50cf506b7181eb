"""The admin's confirmation of a user's deletion says what it changes in the records that stay.

Found 7 Dec: /admin/auth/user/N/delete/ for dora, who had submitted 1,204 jobs, held two and
scheduled a maintenance window, listed Django's objects that go with her (her memberships, her
notification hooks) and not a word of her jobs or windows: `Job.submitter`, `Job.held_by`,
`MaintenanceWindow.created_by` and `cancelled_by` are SET_NULL, which Django's list leaves out.
Now the page (and the users list's "Delete selected users") says, in words, how many jobs lose
their submitter and holder and how many windows their creator and canceller, and that each
record's trail will say so; one query for the jobs and one for the windows, whatever their number.
"""

from __future__ import annotations

import html
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import JobHold
from controlplane.services import maintenance
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _text(response: Any) -> str:
    assert response.status_code == 200
    return " ".join(html.unescape(response.content.decode()).split())



def _held_by(user, team, count: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(count):
        f.make_job(team, submitter=f.make_user(), hold=JobHold.ADMIN, held_by=user, held_at=timezone.now())


def _window(user, node: str, hours: int) -> Any:  # type: ignore[no-untyped-def]
    return maintenance.create(user, nodes=[node], start_at=timezone.now() + timedelta(hours=hours),
                              duration_s=3600, reason="firmware")


def test_the_confirmation_page_says_how_many_jobs_and_windows_lose_the_user(fleet, browser) -> None:
    dora = f.make_user("dora", team=fleet.ml, superuser=True)
    f.finished_jobs_of(dora, fleet.ml, 1204)
    _held_by(dora, fleet.ml, 2)
    _window(dora, "h100-0", 2)
    _window(dora, "h100-1", 3)
    maintenance.cancel(_window(fleet.users["admin"], "h100-2", 2).pk, dora)

    page = _text(browser.get(f"/admin/auth/user/{dora.pk}/delete/"))

    assert "dora submitted 1,204 jobs: they stay, with no submitter, and each job's events say so" in page
    assert "dora holds 2 jobs: they stay held, with no holder, and each job's events say so" in page
    assert ("dora created 2 maintenance windows: they stay, with no creator, and the audit trail says so of "
            "each") in page
    assert ("dora cancelled 1 maintenance window: it stays cancelled, with no canceller, and the audit trail "
            "says so") in page


def test_one_job_and_one_window_are_said_in_the_singular(fleet, browser) -> None:
    erin = f.make_user("erin", team=fleet.ml, superuser=True)
    f.finished_jobs_of(erin, fleet.ml, 1)
    _window(erin, "h100-0", 2)

    page = _text(browser.get(f"/admin/auth/user/{erin.pk}/delete/"))

    assert "erin submitted 1 job: it stays, with no submitter, and its events say so" in page
    assert "erin created 1 maintenance window: it stays, with no creator, and the audit trail says so" in page


def test_delete_selected_users_says_it_of_each_user(fleet, browser) -> None:
    dora, carl, gus = (f.make_user(name, team=fleet.ml) for name in ("dora", "carl", "gus"))
    f.finished_jobs_of(dora, fleet.ml, 3)
    f.finished_jobs_of(carl, fleet.ml, 2)
    _held_by(carl, fleet.ml, 1)

    page = _text(browser.post("/admin/auth/user/", {"action": "delete_selected",
                                                    "_selected_action": [dora.pk, carl.pk, gus.pk]}))

    assert "dora submitted 3 jobs: they stay, with no submitter, and each job's events say so" in page
    assert "carl submitted 2 jobs: they stay, with no submitter, and each job's events say so" in page
    assert "carl holds 1 job: it stays held, with no holder, and its events say so" in page
    assert "gus submitted" not in page and "gus holds" not in page and "maintenance window" not in page


def test_the_page_reads_the_same_number_of_queries_for_thousands_of_jobs_as_for_three(fleet, browser) -> None:
    few, many = f.make_user("few", team=fleet.ml), f.make_user("many", team=fleet.ml)
    f.finished_jobs_of(few, fleet.ml, 3)
    f.finished_jobs_of(many, fleet.ml, 3000)
    browser.get(f"/admin/auth/user/{few.pk}/delete/")  # the session and content types read once

    with CaptureQueriesContext(connection) as for_few:
        assert "few submitted 3 jobs" in _text(browser.get(f"/admin/auth/user/{few.pk}/delete/"))
    with CaptureQueriesContext(connection) as for_many:
        assert "many submitted 3,000 jobs" in _text(browser.get(f"/admin/auth/user/{many.pk}/delete/"))

    assert len(for_many.captured_queries) == len(for_few.captured_queries), [
        q["sql"][:120] for q in for_many.captured_queries]
