"""The jobs page's and the history page's error line for a filter choice they do not take lists
the choices, in the API's words: the pages said Django's "Select a valid choice. runing is not
one of the available choices." where the API (and so `qm list`) lists them."""

from __future__ import annotations

import html

import pytest

from controlplane.choices import JobState
from controlplane.services import job_history

pytestmark = pytest.mark.django_db


def test_the_jobs_pages_error_line_lists_the_states(client_for) -> None:
    alice = client_for("alice")

    page = html.unescape(alice.get("/jobs/", {"state": "runing"}).content.decode())
    api = alice.get("/api/v1/jobs/", {"state": "runing"}).json()["errors"]["state"][0]

    assert api == f"'runing' is not a valid choice; choose one of: {', '.join(s.value for s in JobState)}."
    assert f'<li data-error-for="state"><code>state</code>: {api}</li>' in page
    sort = html.unescape(alice.get("/jobs/", {"ordering": "age"}).content.decode())
    assert "<code>ordering</code>: 'age' is not a field this list sorts by; choose one of: id, submitted_at," in sort


def test_the_history_pages_error_lists_the_states_a_job_ends_in(client_for) -> None:
    response = client_for("alice").get("/history/", {"state": "running"})

    assert response.status_code == 400
    page = html.unescape(response.content.decode())
    assert f"'running' is not a valid choice; choose one of: {', '.join(job_history.ENDED_STATES)}." in page
    download = client_for("alice").get("/history.csv", {"state": "running"})
    assert download.status_code == 400
    assert download.content.decode().startswith("state: 'running' is not a valid choice; choose one of: ")
