"""A waiting job changed in a way that changes how it is scheduled (its shape, GPU types,
runtime limit, priority class) starts a new stay for the ETA record: the first ETA it was told
spoke of the old request, so the next cycle tells it anew (services/holds.update), as a hold or
a requeue does. A rename, or another change the scheduler does not read, keeps it.

On PostgreSQL through the real cycle: one 8-GPU node, a 2-hour job on it, a job behind it told
"when the first one's limit ends"."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, Job, PendingPlace, PriorityClass, Team
from controlplane.services import cycle, holds
from tests.controlplane import factories as f
from tests.controlplane.eta_fixtures import one_node_team, submit

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_node(db: Any) -> Team:
    team = one_node_team()
    PriorityClass.objects.create(name="production", value=1000, grace_period_s=30)
    return team


@pytest.fixture
def told(one_node: Team) -> tuple[Job, datetime, datetime]:
    """(the job behind, when it was told, the ETA told): "when the first job's limit ends"."""
    t0 = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    submit(one_node, "first", 2 * 3600, t0 - timedelta(seconds=10))
    assert cycle.run_cycle("w", now=t0).binds == 1
    behind = submit(one_node, "behind", 3600, t0 + timedelta(seconds=30))
    cycle.run_cycle("w", now=t0 + timedelta(seconds=60))
    place = PendingPlace.objects.get(job=behind)
    assert (place.first_eta, place.first_eta_at) == (t0 + timedelta(hours=2), t0 + timedelta(seconds=60))
    return behind, t0, t0 + timedelta(hours=2)


@pytest.mark.parametrize("changes", [
    {"runtime_limit_s": 1800},
    {"gpus": 4},
    {"gpu_types": ["H100-80GB"]},
    {"priority_class": "production"},
])
def test_a_change_the_scheduler_reads_starts_a_new_stay_told_by_the_next_cycle(told, changes) -> None:
    behind, t0, eta = told
    owner = f.make_user("boss", superuser=True)

    assert holds.update(owner, behind.pk, changes).changed

    place = PendingPlace.objects.get(job=behind)
    assert (place.first_eta, place.first_eta_at, place.eta) == (None, None, None)
    assert place.queue_position is not None  # still in line: only its ETA is to be told again
    (event,) = Event.objects.filter(job=behind, kind=EventKind.JOB_UPDATED)
    assert event.data["eta_stay"] == {"new": True, "first_eta_was": eta.isoformat().replace("+00:00", "Z")}
    assert "a new stay for the ETA record" in event.message

    cycle.run_cycle("w", now=t0 + timedelta(seconds=120))  # the same ETA, told again by this cycle
    place.refresh_from_db()
    assert place.first_eta is not None and place.first_eta_at == t0 + timedelta(seconds=120)


@pytest.mark.parametrize("changes", [{"name": "renamed"}, {"checkpoint_interval_s": 600}])
def test_a_change_the_scheduler_does_not_read_keeps_the_first_eta_told(told, changes) -> None:
    behind, t0, eta = told
    assert holds.update(f.make_user("boss", superuser=True), behind.pk, changes).changed

    place = PendingPlace.objects.get(job=behind)
    assert (place.first_eta, place.first_eta_at, place.eta) == (eta, t0 + timedelta(seconds=60), eta)
    (event,) = Event.objects.filter(job=behind, kind=EventKind.JOB_UPDATED)
    assert "eta_stay" not in event.data and "ETA record" not in event.message
