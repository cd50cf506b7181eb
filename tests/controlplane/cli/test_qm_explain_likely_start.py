"""`qm explain` of a waiting job prints where its start likely lands by the ETA record of jobs of
its size, as the API's explain gives it (`likely_start`: the CLI does not compute it) and the
job's page says it, or why there is none (`likely_start_missing`, in the page's words); its
`etas lately` line says the record of the job's size class after the fleet's (`eta_record`)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _started(team, *, shares: list[float], gpus: int, wait_told_min: float = 120) -> None:
    told_at = timezone.now() - timedelta(hours=3)
    pc = team.default_priority_class or f.make_priority_class()
    Job.objects.bulk_create(
        Job(team=team, priority_class=pc, name=f"ran-{gpus}-{i}", gpus=gpus, runtime_limit_s=3600, state="running",
            submitted_at=told_at, state_changed_at=told_at, started_at=told_at + timedelta(minutes=share * wait_told_min),
            eta_told=told_at + timedelta(minutes=wait_told_min), eta_told_at=told_at)
        for i, share in enumerate(shares))


def test_explain_prints_the_likely_start_of_jobs_of_its_size(alice_qm, fleet) -> None:
    _started(fleet.ml, shares=[0.05] * 30, gpus=1)  # small jobs start almost at once
    _started(fleet.ml, shares=[0.25] * 10 + [0.5, 0.5] + [1.25] * 10, gpus=16)  # the fleet's nodes hold 8
    waiting = f.make_job(fleet.ml, gpus=16, pending_code="InsufficientGpus", queue_position=1,
                         eta=timezone.now() + timedelta(hours=4))
    explained = alice_qm("explain", str(waiting.pk)).out
    line = re.search(r"^  likely start:\s+about (\S+ \S+ UTC) \(in ([^)]+)\), at the median 50% of the wait first told "
                     r"that 22 jobs of 8\+ GPUs had in the last 7 days$", explained, re.M)
    assert line, explained
    assert line.group(2) == "2.0 h", explained  # halfway to its ETA 4 h away
    assert re.search(r"^  etas lately:\s+at the latest, by runtime limits: of 52 jobs that waited with an ETA in the "
                     r"last 7 days, 80\.77% started by the first one told, the median one after 5% of the wait told; "
                     r"of them, 22 jobs of 8\+ GPUs, as this one: 54\.55% by it, the median one after 50%$",
                     explained, re.M), explained


def test_explain_says_why_there_is_no_likely_start_as_the_page_does(alice_qm, fleet) -> None:
    _started(fleet.ml, shares=[0.05] * 30, gpus=1)  # small jobs judged, and a gang short of its class's 20
    _started(fleet.ml, shares=[0.5] * 19, gpus=16)
    waiting = f.make_job(fleet.ml, gpus=16, pending_code="InsufficientGpus", queue_position=1,
                         eta=timezone.now() + timedelta(hours=2))
    explained = alice_qm("explain", str(waiting.pk)).out
    assert re.search(r"^  likely start:\s+none: only 19 of them asked 8\+ GPUs, as this one does, and it takes 20 to "
                     r"tell one \(jobs of another size wait differently\)$", explained, re.M), explained
    # the fleet's record only: too few of its class to say theirs, as the page leaves them out
    assert re.search(r"^  etas lately:\s+at the latest, by runtime limits: of 49 jobs that waited with an ETA in the "
                     r"last 7 days, 100% started by the first one told, the median one after 5% of the wait told$",
                     explained, re.M), explained


def test_explain_says_a_likely_start_passed_and_how_far_past_its_first_eta_the_job_is(alice_qm, fleet) -> None:
    """Counted from the first ETA it was told in this wait, as the page says it: told 5 h ago to
    wait 4 h, at the median 50% it would have started 3 h ago; its first ETA passed 1 h ago. Both
    to the nearest minute, as the page and qm's other distances say them: they were cut, and a
    second's drift read "2h59m ago" (the researcher audit, 7 Dec)."""
    from controlplane.models import PendingPlace

    _started(fleet.ml, shares=[0.5] * 20, gpus=1)
    now = timezone.now()
    waiting = f.make_job(fleet.ml, gpus=1, pending_code="InsufficientGpus")
    # 20 s short of the hour each: 2h59m40s and 59m40s (and the call's second or two) round up, and were cut down
    PendingPlace.objects.create(job=waiting, queue_position=1, eta=now + timedelta(hours=1),
                                first_eta=now - timedelta(hours=1, seconds=-20),
                                first_eta_at=now - timedelta(hours=5, seconds=-20))
    explained = alice_qm("explain", str(waiting.pk)).out
    assert re.search(r"^  likely start:\s+would have been about \S+ \S+ UTC \(3.0 h ago\): it waits longer than "
                     r"the median job of its size did, at the median 50% of the wait first told that 20 jobs of fewer "
                     r"than 8 GPUs had in the last 7 days$", explained, re.M), explained
    assert re.search(r"^  first eta:\s+\S+ \S+ UTC \(told \S+ \S+ UTC\), 60 min past it$", explained, re.M), \
        explained
