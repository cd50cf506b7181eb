"""`qm explain` of a job that can never run as asked says its priority rank as the job page
does: the rank its priority alone would give it, and that the cycle places it after every job
that can start (its queue position). It said "1 of 2 in line for the next cycle" two lines
below "queue position: 2, after every job that can start", a second place that read as where
it stands. The words are one (services/queue_rank_text.py), the page's and qm's."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_explain_of_a_job_that_can_never_run_says_its_rank_is_by_priority_alone(alice_qm, fleet) -> None:
    now = timezone.now()
    never = f.make_job(fleet.ml, fleet.production, name="never", gpus=8, submitted_at=now, queue_position=2,
                       pending_code="CanNeverRun", pending_resolvable=False,
                       pending_message="As asked it can never run.")
    f.make_job(fleet.ml, fleet.research, name="fits", gpus=8, submitted_at=now - timedelta(minutes=5),
               pending_code="InsufficientGpus", queue_position=1)

    explained = alice_qm("explain", str(never.pk)).out

    assert re.search(r"^  queue position:\s+2, after every job that can start$", explained, re.M), explained
    assert "in line for the next cycle" not in explained, explained
    assert re.search(r"^  priority:\s+.*; 1 of 2 by priority alone, but as asked it can never run, so the cycle places "
                     r"it after every job that can start \(its queue position\) \(qm sprio\)$", explained, re.M), explained

def test_explain_of_a_job_behind_one_that_can_never_run_says_its_queue_position_too(alice_qm, fleet) -> None:
    """The job that can start, second by priority, is first among the jobs that can start: its
    queue position. Until 7 Dec its priority line said "2 of 2 in line for the next cycle" two
    lines below "queue position: 1", and said its team's "share" where the page says "dominant
    share", without the runtime limit the page names (among equals the shorter goes first)."""
    now = timezone.now()
    f.make_job(fleet.ml, fleet.production, name="never", gpus=8, submitted_at=now, queue_position=2,
               pending_code="CanNeverRun", pending_resolvable=False, pending_message="As asked it can never run.")
    fits = f.make_job(fleet.ml, fleet.research, name="fits", gpus=8, submitted_at=now - timedelta(minutes=5),
                      pending_code="InsufficientGpus", queue_position=1, runtime_limit_s=7200)

    explained = alice_qm("explain", str(fits.pk)).out

    assert re.search(r"^  queue position:\s+1$", explained, re.M), explained
    assert re.search(r"^  priority:\s+100 \(class research 100\); team ml's dominant share [0-9.]+; runtime limit 2 h; "
                     r"2 of 2 by priority, 1 among the jobs that can start \(its queue position\): the job ahead of it "
                     r"can never run as asked and the cycle places it after every job that can start \(qm sprio\)$",
                     explained, re.M), explained
    assert "in line for the next cycle" not in explained, explained
