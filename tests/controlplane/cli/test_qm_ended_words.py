"""`qm events --follow` and `qm logs --follow` say how a job ended in words, against a live server:
"Job 7 (sweep) timed out, exit code 143.", "--- job 7 timed out ---". Until 5 Dec they put the
state's name in the sentence: "Job 199 (quick) ended timed_out, exit code 143." (demo walk)."""

from __future__ import annotations

from controlplane.choices import JobState
from tests.controlplane import factories as f


def test_a_followed_job_that_timed_out_is_said_in_words(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, name="sweep", state=JobState.TIMED_OUT, exit_code=143)

    events = alice_qm("events", str(job.pk), "--follow")
    logs = alice_qm("logs", str(job.pk), "--follow")

    assert events.code == 0, events.err
    assert events.out.rstrip().endswith(f"Job {job.pk} (sweep) timed out, exit code 143."), events.out
    assert "timed_out" not in events.out.splitlines()[-1]
    assert logs.code == 0, logs.err
    assert f"--- job {job.pk} timed out ---" in logs.err or f"--- job {job.pk} timed out ---" in logs.out, (logs.out,
                                                                                                          logs.err)


def test_a_followed_job_that_was_cancelled_is_said_in_words(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, name="sweep", state=JobState.CANCELLED)

    events = alice_qm("events", str(job.pk), "--follow")

    assert events.code == 0, events.err
    assert events.out.rstrip().endswith(f"Job {job.pk} (sweep) was cancelled."), events.out
