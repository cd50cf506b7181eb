"""The process's one Redis connection for the control plane's own short-lived keys: the loop's
and the notification sender's debounce (controlplane/tasks.py) and the agents' wake-ups
(services/agent_wakeups.py). Short timeouts: Redis is only ever a trigger or a shortcut here,
and every caller carries on without it. (Celery's broker connection and the API's throttle
counters keep connections of their own.)"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings

_client: Any = None
_lock = threading.Lock()


def shared_client() -> Any:
    """The client, made at first use from `REDIS_URL`."""
    global _client
    with _lock:
        if _client is None:
            import redis

            _client = redis.Redis.from_url(
                settings.REDIS_URL, socket_timeout=1.0, socket_connect_timeout=1.0, health_check_interval=10
            )
        return _client
