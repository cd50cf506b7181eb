"""The Celery entry points, run in-process against the real database and Redis: duplicate and
late ticks are no-ops, a tick on a worker that does not lead goes to the leader, triggers are
debounced."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from controlplane import tasks, triggers
from controlplane.models import SchedulerLease
from controlplane.services.cycle import LEASE_NAME
from tests.controlplane.loop_fixtures import LoopFleet

pytestmark = pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the Redis `make test` starts")


@pytest.fixture
def broker() -> redis.Redis:
    client = redis.Redis.from_url(settings.REDIS_URL)
    client.flushdb()
    return client


def queued(broker: redis.Redis, queue: str) -> list[dict[str, Any]]:
    return [json.loads(raw)["headers"] for raw in broker.lrange(queue, 0, -1)]


def test_a_tick_runs_a_cycle_and_a_duplicate_right_after_it_does_nothing(fleet: LoopFleet) -> None:
    first = tasks.tick()
    second = tasks.tick()

    assert first.startswith("led epoch 1")
    assert second == "already served"
    assert SchedulerLease.objects.get(name=LEASE_NAME).cycles == 1


def test_a_tick_after_half_an_interval_runs_again(fleet: LoopFleet) -> None:
    tasks.tick()
    SchedulerLease.objects.filter(name=LEASE_NAME).update(
        last_cycle_at=timezone.now() - timedelta(seconds=settings.QM["CYCLE_INTERVAL_S"])
    )

    assert tasks.tick().startswith("led epoch 1")


def test_a_tick_on_a_worker_that_does_not_lead_is_forwarded_to_the_leaders_own_queue(
    fleet: LoopFleet, broker: redis.Redis
) -> None:
    SchedulerLease.objects.create(name=LEASE_NAME, holder="w9@host-b/4242", epoch=3,
                                  expires_at=timezone.now() + timedelta(seconds=30))

    assert tasks.tick() == "forwarded"

    (message,) = queued(broker, "qm.worker.w9@host-b")
    assert message["task"] == "qm.tick" and message["expires"]
    assert SchedulerLease.objects.get(name=LEASE_NAME).epoch == 3  # nobody took the lease


def test_a_forwarded_tick_is_never_forwarded_again(fleet: LoopFleet, broker: redis.Redis) -> None:
    SchedulerLease.objects.create(name=LEASE_NAME, holder="w9@host-b/4242", epoch=3,
                                  expires_at=timezone.now() + timedelta(seconds=30))

    assert tasks.tick(forwarded=True) == "led elsewhere"
    assert not broker.keys("qm.worker.*")


def test_a_dead_leaders_lease_is_taken_over_with_a_higher_epoch(fleet: LoopFleet) -> None:
    SchedulerLease.objects.create(name=LEASE_NAME, holder="w9@host-b/4242", epoch=3,
                                  expires_at=timezone.now() - timedelta(seconds=1))

    assert tasks.tick().startswith("led epoch 4")


def test_a_triggered_cycle_already_served_by_a_later_one_does_nothing(fleet: LoopFleet) -> None:
    requested = timezone.now()
    tasks.tick()  # a cycle that read the database after the request

    assert tasks.cycle(requested_at=requested.timestamp()) == "already served"


def test_a_triggered_cycle_runs_when_no_cycle_read_the_database_since(fleet: LoopFleet) -> None:
    tasks.tick()

    assert tasks.cycle(requested_at=(timezone.now() + timedelta(seconds=1)).timestamp()).startswith("led")


def test_requests_within_the_debounce_window_share_one_cycle(broker: redis.Redis) -> None:
    for _ in range(5):
        triggers.request_cycle()

    (message,) = queued(broker, "qm.loop")
    assert message["task"] == "qm.cycle" and message["eta"]
    assert broker.pttl(triggers.DEBOUNCE_KEY) > 0


def test_a_request_after_the_window_closes_triggers_another_cycle(broker: redis.Redis) -> None:
    triggers.request_cycle()
    broker.delete(triggers.DEBOUNCE_KEY)  # the window closed

    triggers.request_cycle()

    assert len(queued(broker, "qm.loop")) == 2


def test_in_the_embedded_demo_a_request_wakes_the_in_process_loop(settings: Any, broker: redis.Redis) -> None:
    settings.QM = {**settings.QM, "IN_PROCESS_LOOP": True}
    triggers.cycle_requested.clear()

    triggers.request_cycle()

    assert triggers.cycle_requested.is_set()
    assert not queued(broker, "qm.loop")


def test_reconcile_task_reports_whether_it_found_work(fleet: LoopFleet) -> None:
    assert tasks.reconcile_nodes() == "nothing to do"
