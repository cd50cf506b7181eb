"""The shared store (Redis) away: the pages that cache in it compute afresh instead of failing.

Before 2 Dec a job's page and the teams page answered 500 while Redis was away (their cached
queue order, ETA record and day bins were read from Redis unguarded), though the web is meant to
keep serving on PostgreSQL alone (docs/operations.md, When Redis or PostgreSQL goes away). A real
Redis URL where nobody listens; nothing mocked.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import Client

from controlplane.shared_store import Store, StoreUnreachable, shared_store
from tests.controlplane import factories as f
from tests.controlplane.loop import chaos_cluster
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job, register_node

pytestmark = [
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the Redis and PostgreSQL `make test` starts"),
    pytest.mark.django_db,
]


@pytest.fixture
def redis_away(settings: Any) -> Iterator[None]:
    settings.REDIS_URL = f"redis://127.0.0.1:{chaos_cluster.free_port()}/0"
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}
    shared_store.cache_clear()
    yield
    shared_store.cache_clear()


def test_reads_are_misses_and_writes_are_skipped_but_a_lock_is_never_faked(
        redis_away: None, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    store = Store()
    store.set("k", {"a": 1}, 60)  # not kept, no error
    assert store.get("k") is None
    assert store.get_many(["k", "j"]) == {}
    with pytest.raises(StoreUnreachable, match="'lock' could not be taken") as refused:
        store.add("lock", "me", 60)  # the what-if replays' lock: refusing is the only honest answer
    assert isinstance(refused.value.__cause__, redis.exceptions.ConnectionError)
    store.delete("lock")  # releasing a lock Redis keeps anyway until its time-to-live: logged, not raised
    events = [r.msg.get("event") for r in caplog.records if isinstance(r.msg, dict)]
    assert events.count("shared store unreachable; read as a miss") == 2
    assert events.count("shared store unreachable; not kept") == 1
    assert events.count("shared store unreachable; not forgotten") == 1


def test_a_jobs_page_and_the_teams_page_are_served_without_redis(redis_away: None) -> None:
    fleet = build_loop_fleet()
    register_node("gpu-01")
    job = make_job(fleet, gpus=16, gpus_per_node=8)  # waits: its page reads the queue order and ETA record
    client = Client()
    client.force_login(f.make_user("alice", team=fleet.team))
    assert client.get(f"/jobs/{job.pk}/").status_code == 200
    assert client.get("/teams/").status_code == 200
