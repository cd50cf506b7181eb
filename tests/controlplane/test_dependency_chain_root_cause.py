"""A pipeline's failure, read from its last step: every job cancelled down an afterok chain names
the job whose end began it and what became of it. The step after the failed one said "Job 107
failed (exit 3)", but every step after that only "Job 109 was cancelled", and the researcher
climbed the chain one job page at a time to find the failure. A job cancelled by a person is
no chain's cause: its dependent says it was cancelled, as before."""

from __future__ import annotations

from typing import Any

import pytest

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job
from controlplane.services import transitions
from controlplane.services.dependencies import NEVER_SATISFIED
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, build_loop_fleet, make_job
from tests.controlplane.test_dependency_resolution import depends, run_and_exit

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _bootstrap_secret(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@pytest.fixture
def loop_fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()


def cancelled_words(job: Job) -> str:
    return Event.objects.get(job=job, kind=EventKind.JOB_CANCELLED).message


def test_every_step_down_a_failed_chain_names_the_failure(loop_fleet: LoopFleet) -> None:
    pre, train, evaluate, report = (make_job(loop_fleet, name=n) for n in ("pre", "train", "eval", "report"))
    depends(train, pre)
    depends(evaluate, train)
    depends(report, evaluate)

    run_and_exit(loop_fleet, pre, 3)

    assert cancelled_words(train) == (f"Job {pre.pk} failed (exit 3): this job was to run only after it "
                                      "succeeded (afterok), so it is cancelled.")
    for job, upstream in ((evaluate, train), (report, evaluate)):
        words = (f"Job {upstream.pk} was cancelled because job {pre.pk} failed (exit 3): this job was to run "
                 "only after it succeeded (afterok), so it is cancelled.")
        assert cancelled_words(job) == words
        row = Job.objects.get(pk=job.pk)
        assert (row.state, row.pending_code, row.pending_message) == (JobState.CANCELLED, NEVER_SATISFIED, words)
        event = Event.objects.get(job=job, kind=EventKind.JOB_CANCELLED)
        assert (event.data["upstream"], event.data["because_job"]) == (upstream.pk, pre.pk)


def test_a_chain_begun_by_a_persons_cancel_names_that_cancel(loop_fleet: LoopFleet) -> None:
    first, second, third = (make_job(loop_fleet, name=n) for n in ("first", "second", "third"))
    depends(second, first)
    depends(third, second)

    assert transitions.cancel_job(Job.objects.get(pk=first.pk), "user:alice")

    assert cancelled_words(second).startswith(f"Job {first.pk} was cancelled: this job was to run")
    assert "because_job" not in Event.objects.get(job=second, kind=EventKind.JOB_CANCELLED).data
    assert cancelled_words(third).startswith(
        f"Job {second.pk} was cancelled because job {first.pk} was cancelled: this job was to run")
