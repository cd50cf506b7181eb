"""The first bucket of a fresh fleet's history is averaged over the time it covers, from the
instant the fleet began, not from the start of its minute.

Demo walk, 5 Dec: on a fresh 128-GPU fleet `GET /api/v1/metrics/utilization/` said
`capacityGpus` 63.8 for the first minute (and 99.4 for the first hour): the nodes registered half
way through the accounting's first minute, and that minute's GPU-seconds were averaged over all
60 s of it. The ratios of the tiers were right; the capacity figure was not.

Fleet: two simulated agents (8 H100 each) register at 10:00:24 on a fleet that had no node.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from controlplane.services import accounting, utilization_series
from controlplane.services.showback import Window
from tests.controlplane.accounting.builders import T0, h100, minutes
from tests.controlplane.loop_fixtures import BOOTSTRAP, register_node

pytestmark = pytest.mark.django_db
SECONDS = timedelta(seconds=1)


@pytest.fixture(autouse=True)
def _bootstrap(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


def _fresh_fleet_registered_at_00_24() -> int:
    h100()
    accounting.roll_up(T0 + 15 * SECONDS)  # the accounting's first run: no node yet
    gpus = sum(register_node(name, now=T0 + 24 * SECONDS, capacity_tier="reserved")[0].gpu_count
               for name in ("sim-1", "sim-2"))
    t = 30 * SECONDS
    while t <= minutes(10):
        accounting.roll_up(T0 + t)
        t += 15 * SECONDS
    return gpus


def test_the_first_minute_of_a_fresh_fleet_counts_from_when_its_nodes_joined() -> None:
    gpus = _fresh_fleet_registered_at_00_24()
    points = utilization_series.utilization_series(Window(T0, T0 + minutes(10), "10m"), T0 + minutes(10),
                                                   bucket=accounting.MINUTE)
    assert points[0].start == T0 and points[0].seconds == 36  # 10:00:24 → 10:01:00
    assert [p.capacity_gpus for p in points] == [gpus] * len(points)  # it said 9.6 of 16 for the first


def test_the_first_hour_of_a_fresh_fleet_counts_from_when_its_nodes_joined() -> None:
    gpus = _fresh_fleet_registered_at_00_24()
    points = utilization_series.utilization_series(Window(T0, T0 + minutes(10), "10m"), T0 + minutes(10),
                                                   bucket=accounting.HOUR)
    assert len(points) == 1 and points[0].seconds == 10 * 60 - 24
    assert points[0].capacity_gpus == gpus  # it said 15.36 of 16
