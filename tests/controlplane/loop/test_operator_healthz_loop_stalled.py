"""/healthz says in words when the scheduling loop has stalled.

Found on the operator's night drill: with the loop stopped for three minutes /healthz answered
`{"status": "ok", …, "loop": {"last_cycle_age_s": 183.2}}`, the same shape as a healthy loop's;
a probe had to know what age is too old. It still answers 200 (the web serves, and a load
balancer must not take it out), and now says `"stalled": true` past `stalled_after_s` (the
docs' alert threshold: 30 s, or five cycle intervals when those are longer).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from controlplane.models import SchedulerLease


def _lease(age_s: float) -> None:
    SchedulerLease.objects.create(name="scheduler", epoch=3, holder="w1", expires_at=timezone.now(),
                                  last_cycle_at=timezone.now() - timedelta(seconds=age_s))


def test_operator_healthz_says_the_loop_stalled_after_three_silent_minutes(client: Client, fleet: Any) -> None:
    _lease(180)

    response = client.get("/healthz")

    assert response.status_code == 200
    loop = response.json()["loop"]
    assert loop["stalled"] is True and loop["stalled_after_s"] == 30.0 and loop["last_cycle_age_s"] >= 180


def test_operator_healthz_of_a_running_loop_is_not_stalled(client: Client, fleet: Any) -> None:
    _lease(1.5)

    assert client.get("/healthz").json()["loop"]["stalled"] is False


def test_operator_healthz_threshold_follows_a_slow_cycle_interval(client: Client, fleet: Any, settings: Any) -> None:
    settings.QM = {**settings.QM, "CYCLE_INTERVAL_S": 20}
    _lease(60)

    loop = client.get("/healthz").json()["loop"]

    assert loop["stalled_after_s"] == 100.0 and loop["stalled"] is False


def test_operator_healthz_before_the_first_cycle_does_not_know(client: Client, fleet: Any) -> None:
    assert client.get("/healthz").json()["loop"]["stalled"] is None
