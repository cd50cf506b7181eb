"""A sentence that names several jobs of another team in clauses alike says that clause once, with
how many jobs it stands for, where naming each by its team only made it repeat word for word.

Found walking the demo as a researcher (5 Dec): job 57's page and `qm events` read "It could
start by preemption, but the candidates are protected: a job of team language has run 2 s of its
300 s minimum runtime; a job of team language has run 2 s of its 300 s minimum runtime; a job of
team language has run 2 s of its 300 s minimum runtime; it may preempt them from …": three jobs
(the engine names them by id) said alike, which reads as the page stuttering."""

from __future__ import annotations

import pytest

from controlplane.services import job_mentions
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1"


def test_clauses_alike_about_another_teams_jobs_are_said_once_with_their_count(fleet, alice, admin) -> None:
    a, b, c = (f.make_job(fleet.vision, gpus=8) for _ in range(3))
    other = f.make_job(fleet.vision, gpus=8)
    words = (f"It could start by preemption, but the candidates are protected: job {a.pk} has run 2 s of its 300 s "
             f"minimum runtime; job {b.pk} has run 2 s of its 300 s minimum runtime; job {c.pk} has run 2 s of its "
             f"300 s minimum runtime; it may preempt them from t=1796509000 and start once they have stopped, by "
             f"t=1796509030.")
    mine = f.make_job(fleet.ml, gpus=16, pending_code="MinimumRuntimeProtected", pending_words=words)

    said = alice.get(f"{J}/jobs/{mine.pk}/").json()["pending_message"]

    assert said.startswith("It could start by preemption, but the candidates are protected: a job of team vision "
                           "has run 2 s of its 300 s minimum runtime (3 such jobs); it may preempt them from "), said
    assert f"job {a.pk} " not in said and f"job {b.pk} " not in said
    # Clauses that differ are each said; an admin reads every id.
    two = job_mentions.to_team(fleet.ml.pk).say(
        f"job {a.pk} has run 2 s of its 300 s minimum runtime; job {b.pk} has run 9 s of its 300 s minimum runtime; "
        f"job {other.pk} has run 9 s of its 300 s minimum runtime.")
    assert two == ("a job of team vision has run 2 s of its 300 s minimum runtime; a job of team vision has run 9 s "
                   "of its 300 s minimum runtime (2 such jobs)."), two
    assert f"job {a.pk} has run 2 s" in admin.get(f"{J}/jobs/{mine.pk}/").json()["pending_message"]
