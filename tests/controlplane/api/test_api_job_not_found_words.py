"""Answers that read wrong from a terminal: a job that does not exist and another team's job
answer the same 404, in words (`qm status 999` printed DRF's "No Job matches the given query.");
an unknown `?format=` is a 400 naming it (it was a 404 "Not found.", as if the path were wrong)."""

from __future__ import annotations

import pytest

from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.mark.parametrize("suffix", ["", "explain/", "events/"])
def test_missing_and_other_teams_jobs_answer_the_same_404_in_words(fleet, alice, suffix) -> None:
    theirs = f.make_job(fleet.vision)
    missing = theirs.pk + 1000

    for pk in (theirs.pk, missing):
        r = alice.get(f"{J}/jobs/{pk}/{suffix}")
        assert r.status_code == 404
        assert r.json() == {"detail": f"No job {pk}, or not yours to see.", "code": "not_found"}


def test_cancelling_another_teams_job_is_the_same_404(fleet, alice) -> None:
    theirs = f.make_job(fleet.vision)

    r = alice.post(f"{J}/jobs/{theirs.pk}/cancel/")

    assert r.status_code == 404 and r.json()["detail"] == f"No job {theirs.pk}, or not yours to see."


@pytest.mark.parametrize("path", ["jobs/", "jobs/{pk}/", "jobs/{pk}/explain/", "nodes/", "metrics/queue/", "auth/me/"])
def test_an_unknown_format_is_a_400_naming_it_not_a_missing_endpoint(fleet, alice, path) -> None:
    """`GET jobs/?format=xml` answered 404 "Not found.", as if there were no jobs endpoint."""
    job = f.make_job(fleet.ml)

    r = alice.get(f"{J}/{path.format(pk=job.pk)}", {"format": "xml"})

    assert r.status_code == 400
    assert r.json()["errors"] == {"format": ["'xml' is not a format here: use api, json."]}
    assert alice.get(f"{J}/{path.format(pk=job.pk)}", {"format": "json"}).status_code == 200
