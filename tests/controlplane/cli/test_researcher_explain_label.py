"""`qm explain JOB` headed a job its owner had cancelled, still stopping, "Job 12 (x) is
preempting." while `qm list` and `qm status` said `stopping: cancelled` (the explanation gave
only the stored state); and a finished job "is timed_out". The explanation now carries the
job's `state_label`, and `qm explain` heads with it in words."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from controlplane.models import Job
from tests.controlplane import factories as f
from tests.controlplane.stopping_jobs import STOPS, make_stopping_jobs

pytestmark = pytest.mark.slow


def test_explain_heads_with_why_a_job_stops(alice_qm, fleet) -> None:
    jobs = make_stopping_jobs(fleet)
    for name, (_, label) in STOPS.items():
        out = alice_qm("explain", str(jobs[name].pk)).out
        assert out.splitlines()[0] == f"Job {jobs[name].pk} ({name}) is {label}.", out


@pytest.mark.parametrize(("state", "words"), [
    (JobState.TIMED_OUT, "timed out"), (JobState.FAILED, "failed"), (JobState.SUCCEEDED, "succeeded"),
    (JobState.CANCELLED, "was cancelled"),
])
def test_explain_says_how_a_job_ended_as_a_sentence(alice_qm, fleet, state, words) -> None:
    """It said "Job 139 (failer) is failed.", "is succeeded", "is timed out", "is cancelled"; now
    as qm events and qm logs end a followed job: "Job 139 (failer) failed."."""
    job = f.make_job(fleet.ml, name="short", state=state)
    assert alice_qm("explain", str(job.pk)).out.splitlines()[0] == f"Job {job.pk} (short) {words}."
    assert alice_qm("--json", "explain", str(job.pk)).json()["state_label"] == state
    assert Job.objects.filter(pk=job.pk).exists()
