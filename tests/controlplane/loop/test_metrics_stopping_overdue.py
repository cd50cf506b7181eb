"""/metrics names the GPUs a stopped job's processes still hold long after their deadline.

Found by an SRE audit of the agent (4 Dec): a process stuck in uninterruptible sleep outlives
SIGKILL; its member, and so its allocation, stays releasing and its GPUs go to no one (rightly:
a GPU is reused only once its old owner is gone). Only the agent's log on the node said so, once:
no alert could be written."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from rest_framework.test import APIClient

from controlplane.services import transitions
from tests.controlplane.loop_fixtures import LoopFleet, bind, make_job, register_node

pytestmark = pytest.mark.django_db


def _overdue(settings: Any) -> dict[str, float]:
    settings.QM = {**settings.QM, "METRICS_TOKEN": "scrape-me"}
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer scrape-me")
    response = client.get("/metrics")
    assert response.status_code == 200, response.content
    return {s.labels["node"]: s.value for fam in text_string_to_metric_families(response.content.decode())
            for s in fam.samples if s.name == "quartermaster_gpus_stopping_overdue"}


def _stop(allocation: Any, *, told_ago_s: float, grace_s: float) -> None:
    assert transitions.signal_stop(
        allocation.pk, allocation.generation, reason="cancelled", grace_period_s=grace_s,
        at=timezone.now() - timedelta(seconds=told_ago_s), actor="test", message="stop")


def test_gpus_held_past_a_stops_deadline_are_counted_per_node(fleet: LoopFleet, settings: Any) -> None:
    a, _ = register_node("gpu-a")
    b, _ = register_node("gpu-b")
    stuck = bind(make_job(fleet, gpus=2, name="stuck"), {a: [0, 1]})
    stopping = bind(make_job(fleet, gpus=4, name="stopping"), {b: [0, 1, 2, 3]})
    bind(make_job(fleet, gpus=1, name="running"), {b: [4]})

    assert _overdue(settings) == {}
    _stop(stuck, told_ago_s=300, grace_s=30)       # deadline 4.5 min ago
    _stop(stopping, told_ago_s=10, grace_s=30)     # deadline still ahead

    assert _overdue(settings) == {"gpu-a": 2.0}
