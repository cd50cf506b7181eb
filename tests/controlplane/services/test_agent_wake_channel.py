"""A held agent wait is answered by its own control plane's wake-ups only, and is not cut short
by a re-check that finds nothing new.

Redis keeps keys per database (`redis://host/N`), but its publish/subscribe channels are one
namespace for the whole server. Until 7 Dec every control plane published its wake-ups on
`qm:agent:wake`: two deployments on one Redis server at different database numbers (staging and
production; the test suite's three workers) answered each other's agents' waits, each time a
node of one had the id of a node woken by the other. The wait then ended early with nothing
woken, and its agent asked again. CI saw it as a live agent's 12 s wait answered at 11.63 s
(test_agent_wait_released_when_host_vanishes.py). The channel is now named for the database.

And a wait woken with nothing new for its nodes went back to its agent at once with nothing
woken: after a wake-up for another database's node, after the listener's re-check when it lost
and regained Redis, and at every web process's first wait (the listener, started by it, has every
wait re-check once subscribed). It now waits on to its timeout, as nothing happened for it. Either
change alone keeps the first test's wait to its timeout; both together make a wake-up elsewhere
cost this process nothing.

Real Redis; the other control plane is a process of its own on the next database.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from django.conf import settings

from controlplane.services import agent_wakeups

REPO = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the run's Redis")

NODE = 7  # a node id both control planes have

# Another control plane (its own Redis database) wakes its node 7, as a commit binding work would.
OTHER = """
import django
django.setup()
from controlplane.services import agent_wakeups
agent_wakeups.wake_nodes([7])
"""


def _another_database() -> str:
    parts = urlsplit(settings.REDIS_URL)
    ours = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(ours + 8) % 16}"))


def _waiting(timeout_s: float) -> tuple[threading.Thread, dict[str, Any]]:
    """A wait on node 7 from now, held by a thread as a web thread holds one."""
    _, since = agent_wakeups.wait_for_wake([NODE], None, 0)
    seen: dict[str, Any] = {}

    def hold() -> None:
        began = time.monotonic()
        seen["woken"], _ = agent_wakeups.wait_for_wake([NODE], since, timeout_s)
        seen["held"] = time.monotonic() - began

    thread = threading.Thread(target=hold)
    thread.start()
    time.sleep(0.3)  # held, and the listener subscribed
    return thread, seen


def test_a_wake_up_in_another_redis_database_does_not_answer_a_wait() -> None:
    thread, seen = _waiting(4.0)
    env = {**os.environ, "REDIS_URL": _another_database(), "DJANGO_SETTINGS_MODULE": "controlplane.settings",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", OTHER], env=env, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    thread.join(10)

    assert seen["woken"] == [] and seen["held"] >= 3.9, seen


def test_a_wake_up_in_its_own_database_answers_the_wait_at_once() -> None:
    thread, seen = _waiting(10.0)
    agent_wakeups.wake_nodes([NODE])
    thread.join(10)

    assert seen["woken"] == [NODE] and seen["held"] < 2.0, seen


def test_the_listeners_recheck_after_losing_redis_does_not_end_a_wait() -> None:
    thread, seen = _waiting(4.0)
    # Its connection cut, as a Redis restart or a network blip cuts it: it subscribes again and
    # has every wait re-check what it missed. Nothing was published for node 7 meanwhile.
    client = redis.Redis.from_url(settings.REDIS_URL)
    # Subscribed by now, unless this wait started the listener on a loaded machine: looked for
    # until it is there, not for 0.3 s only.
    deadline = time.monotonic() + 3.0
    while not (listeners := [c for c in client.client_list(_type="pubsub")
                             if c.get("name") == agent_wakeups.listener_name()]):
        assert time.monotonic() < deadline, client.client_list(_type="pubsub")
        time.sleep(0.05)
    for listener in listeners:
        client.client_kill_filter(_id=listener["id"])
    thread.join(10)

    assert seen["woken"] == [] and seen["held"] >= 3.9, seen
