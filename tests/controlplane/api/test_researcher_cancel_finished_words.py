"""Cancelling a job that has already ended answered "Job 31 is timed_out; only pending or
running jobs can be cancelled." (the state's code, printed as is by `qm cancel`); it now says
how the job ended in words, as the pages do: "Job 31 has already ended: timed out; …"."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.choices import JobState
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet


@pytest.mark.django_db
@pytest.mark.parametrize("state, words", [(JobState.TIMED_OUT, "timed out"), (JobState.SUCCEEDED, "succeeded"),
                                          (JobState.CANCELLED, "cancelled"), (JobState.FAILED, "failed")])
def test_cancelling_an_ended_job_says_how_it_ended(fleet: Fleet, alice: APIClient, state: str, words: str) -> None:
    job = f.make_job(fleet.ml, state=state)

    response = alice.post(f"/api/v1/jobs/{job.pk}/cancel/")

    assert response.status_code == 409
    assert response.json()["detail"] == (
        f"Job {job.pk} has already ended: {words}; only pending or running jobs can be cancelled.")
