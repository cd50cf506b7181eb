"""/metrics says how long the longest-waiting job that can run has waited, as the overview's tile
"Oldest feasible job waits" says it (the last cycle's finding: `FleetSample.oldest_feasible_pending_s`).
Until 7 Dec no series carried it: the overview read "16 min" on the demo while an on-call
operator's Prometheus could alert on queue depth but not on a job starving in it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.models import FleetSample
from tests.controlplane.fleet_fixture import Fleet, client_for
from tests.controlplane.test_metrics_nodes import scrape

pytestmark = pytest.mark.django_db

NAME = "quartermaster_oldest_feasible_pending_seconds"


def _sample(at, oldest_s: float | None, pending: int) -> None:
    FleetSample.objects.create(at=at, epoch=1, total_gpus=48, allocated_gpus=8, stranded_gpus=0, pending_jobs=pending,
                               running_jobs=1, oldest_feasible_pending_s=oldest_s)


def test_the_oldest_feasible_wait_is_the_last_cycles_as_the_overview_says_it(fleet: Fleet) -> None:
    client = client_for(fleet, "admin")
    series, text = scrape(client)
    assert NAME not in series  # no cycle yet: nothing was found, so no series (as reserved GPUs)

    now = timezone.now()
    _sample(now - timedelta(seconds=10), 120.0, pending=3)
    _sample(now - timedelta(seconds=5), 960.5, pending=3)
    series, text = scrape(client)
    assert series[NAME] == {(): 960.5}
    assert f"# TYPE {NAME} gauge" in text

    # Jobs wait but none can run (held, waiting on another, never able to): no feasible wait, 0,
    # so an alert on it stays quiet rather than losing its series.
    _sample(now, None, pending=2)
    series, _ = scrape(client)
    assert series[NAME] == {(): 0.0}
