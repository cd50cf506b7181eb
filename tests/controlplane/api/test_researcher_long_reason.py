"""A waiting job's reason too long for its column is cut at a clause (services/cycle.fit_stored).
The column held 500 characters until 5 Dec (1,000 since: test_long_reason_keeps_its_eta.py); the
engine's sentence for a job that
could start by preemption but whose candidates are protected runs longer with three or more
candidates, and was cut mid-clause, mid-number: the API, `qm explain` and the job page read
"… job 15 has run 61 s of its 300 " (the rest, "s minimum runtime; it may preempt them from
… and start … by …", which explains the ETA, lost; a "3000 s" could have read "300"). A reason
too long is now cut at the last clause that fits, and says it was cut ("…")."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.models import Job
from controlplane.models.jobs import split_numbers
from controlplane.services.cycle import fit_stored
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet

# The engine's words (scheduler_core/explain.py), as the demo showed them on 30 November.
LONG = ("Holds a reservation for 16 GPUs on 2 nodes from 2026-11-30 04:41:09 UTC, when team language's running "
        "jobs have released the 16 H100-80GB GPUs its quota lacks now (team language uses 64 of 32 nominal "
        "H100-80GB GPUs and can borrow 0 more; this job needs 16) and the GPUs are free, by runtime limits; "
        "smaller jobs may use those GPUs only if they end before then. It could also start by preemption, but "
        "the candidates are protected: job 14 has run 53 s of its 300 s minimum runtime; job 15 has run 53 s "
        "of its 3000 s minimum runtime; job 17 has run 20 s of its 300 s minimum runtime; it may preempt them "
        "from 2026-11-30 01:46:09 UTC and start once they have stopped, by 2026-11-30 01:46:39 UTC.")


def test_a_long_reason_is_cut_at_a_clause_and_says_so() -> None:
    assert len(LONG) > 500
    cut = fit_stored(LONG, 500)

    assert len(cut) <= 500 and len(split_numbers(cut)[0]) <= 500
    assert cut.endswith("minimum runtime; …")
    assert LONG.startswith(cut[:-1].rstrip())
    assert "of its 300 " not in cut[-30:]  # never a number without its unit, or cut short


def test_a_reason_that_fits_is_kept_whole() -> None:
    assert fit_stored("Over quota: team ml uses 16 of 16 nominal H100-80GB GPUs.", 500) == (
        "Over quota: team ml uses 16 of 16 nominal H100-80GB GPUs.")


def test_one_long_clause_is_cut_at_a_word(fleet: Fleet) -> None:
    cut = fit_stored("x" * 10 + " " + "word " * 200, 500)
    assert len(cut) <= 500 and cut.endswith("word …")


@pytest.mark.django_db
def test_the_api_reads_the_cut_reason_whole_clauses(fleet: Fleet, alice: APIClient) -> None:
    job = f.make_job(fleet.ml, name="waiting")
    Job.objects.filter(pk=job.pk).update(pending_code="WaitingForReservation", pending_words=fit_stored(LONG, 500))

    message = alice.get(f"/api/v1/jobs/{job.pk}/").json()["pending_message"]

    assert message.endswith("minimum runtime; …") and len(message) <= 500
