"""A waiting job whose reason flips back and forth records each reason once per window, not
once per flip. Found on the demo: a gang over its quota held the head's reservation in one
cycle (WaitingForReservation) and lost it in the next to a short job of its team that arrived
ahead of it (QuotaExceeded), 13 job.pending events in two minutes. On PostgreSQL through the
real cycle."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Event, Job, Team
from controlplane.services import cycle
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def team() -> Team:
    h100 = f.make_gpu_type("H100-80GB", 80)
    for i in range(2):
        f.make_node(h100, name=f"n{i}", pool="h100")
    team = f.make_team("ml", default_priority_class=f.make_priority_class("research", 100))
    f.make_quota(team, h100, 16)
    return team


def _job(team: Team, name: str, gpus: int, limit_s: int, at, **shape) -> Job:
    return Job.objects.create(team=team, name=name, priority_class=team.default_priority_class, gpus=gpus,
                              runtime_limit_s=limit_s, submitted_at=at, state_changed_at=at, **shape)


def _reasons(job: Job) -> list[str]:
    return list(Event.objects.filter(job=job, kind="job.pending").order_by("created_at", "id")
                .values_list("reason", flat=True))


def test_a_reason_that_comes_back_within_the_window_is_not_recorded_again(team: Team) -> None:
    t0 = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    _job(team, "r", 16, 3600, t0 - timedelta(seconds=5), gpus_per_node=8)
    assert cycle.run_cycle("w", now=t0).binds == 1  # ml at its quota of 16, the fleet full
    big = _job(team, "big", 16, 6 * 3600, t0 + timedelta(seconds=1), gpus_per_node=8)
    seen = []
    for k in range(4):
        at = t0 + timedelta(seconds=10 + 20 * k)
        if k % 2:  # a short job of its team arrives ahead of it (shorter limit) and takes the head
            _job(team, f"short{k}", 1, 600, at - timedelta(seconds=1))
        else:
            Job.objects.filter(name__startswith="short", state=JobState.PENDING).update(
                state=JobState.CANCELLED, finished_at=at, state_changed_at=at)
        cycle.run_cycle("w", now=at)
        big.refresh_from_db()
        seen.append(big.pending_code)
    assert seen == ["WaitingForReservation", "QuotaExceeded", "WaitingForReservation", "QuotaExceeded"]
    assert _reasons(big) == ["WaitingForReservation", "QuotaExceeded"]

    # after the window, a reason that comes back is recorded again
    later = t0 + timedelta(seconds=10 + 60 + cycle.REASON_FLAP_WINDOW_S)
    Job.objects.filter(name__startswith="short", state=JobState.PENDING).update(
        state=JobState.CANCELLED, finished_at=later, state_changed_at=later)
    cycle.run_cycle("w", now=later)
    assert _reasons(big) == ["WaitingForReservation", "QuotaExceeded", "WaitingForReservation"]
