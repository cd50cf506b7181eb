"""Per-user throttling that stays cheap at hundreds of requests per second.

DRF's stock throttles keep a list of every request time per user and rewrite it on each call,
which costs more the busier a user is. Here each user gets one counter per fixed window
(`INCR` on Redis, shared by every gunicorn worker and host); the window's end is the
Retry-After. Rates come from REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] at request time, so
settings overrides apply without a restart: `user` for signed-in users, `login` for token
requests (keyed by client address, against password guessing).
"""

from __future__ import annotations

import time
from functools import cache

from django.conf import settings
from django.core.cache import BaseCache, caches
from django.core.cache.backends.redis import RedisCache
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_RATES = {"user": "100000/hour", "login": "30/minute"}


@cache
def _counter_store() -> BaseCache:
    """Redis when configured (counters shared by all processes), else the default cache."""
    if settings.REDIS_URL:
        return RedisCache(settings.REDIS_URL, {"KEY_PREFIX": "qm-throttle", "TIMEOUT": 3600})
    return caches["default"]


def parse_rate(rate: str) -> tuple[int, int]:
    """'100/minute' → (100, 60). The period may be s, m, h or d, spelled out or not."""
    count, _, period = rate.partition("/")
    return int(count), _PERIODS[period.strip()[0].lower()]


class FixedWindowThrottle(BaseThrottle):
    scope = "user"

    def __init__(self) -> None:
        self._retry_after: float | None = None

    def ident(self, request: Request) -> str | None:
        user = request.user
        return f"u{user.pk}" if user is not None and user.is_authenticated else None

    def allow_request(self, request: Request, view: APIView) -> bool:
        ident = self.ident(request)
        if ident is None:
            return True
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope) or DEFAULT_RATES[self.scope]
        limit, period = parse_rate(rate)
        now = time.time()
        window = int(now // period)
        key = f"{self.scope}:{ident}:{period}:{window}"
        store = _counter_store()
        store.add(key, 0, timeout=period + 1)
        try:
            count = store.incr(key)
        except ValueError:  # expired between add and incr: this request opens the window
            store.add(key, 1, timeout=period + 1)
            count = 1
        if count > limit:
            self._retry_after = (window + 1) * period - now
            return False
        return True

    def wait(self) -> float | None:
        return self._retry_after


class PerUserThrottle(FixedWindowThrottle):
    scope = "user"


class LoginThrottle(FixedWindowThrottle):
    scope = "login"

    def ident(self, request: Request) -> str | None:
        return f"ip{self.get_ident(request)}"
