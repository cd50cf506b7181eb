"""A job that does not exist and another team's job answer the same 404, in words.

Found with `qm status 999`: "error: No Job matches the given query." (DRF's own sentence, with
the model's class name in it)."""

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
