"""Per-user throttling that stays cheap at hundreds of requests per second.

DRF's stock throttles keep a list of every request time per user and rewrite it on each call,
which costs more the busier a user is. Here each user gets one counter per fixed window
(`INCR` on Redis in one round trip, shared by every gunicorn worker and host); the window's end is the
Retry-After. Rates come from REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"] at request time, so
settings overrides apply without a restart: `user` for signed-in users, `login` for token
requests (keyed by client address, against password guessing), `login_user` for the failed
sign-ins of one username from any address (a sliding window: `username_refused`), and
`agent_auth` for the node agents' failed authentications per client address (the same sliding
window: `agent_auth_refused`). A client's address is `client_address`'s, for all of them.
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from functools import cache
from typing import Any

import structlog
from django.conf import settings
from django.core.cache import caches
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

log = structlog.get_logger(__name__)
_PERIODS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_RATES = {"user": "100000/hour", "login": "30/minute", "login_user": "20/hour", "agent_auth": "60/minute"}


@cache
def _redis() -> Any:
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1.0, socket_connect_timeout=1.0)


# INCR, and on the window's first request its expiry, atomically in Redis: one command and one
# reply per request (a pipeline of INCR and EXPIRE NX costs two of each to send and parse).
_INCR_WITH_EXPIRY = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
"""


@cache
def _incr_with_expiry() -> Any:
    return _redis().register_script(_INCR_WITH_EXPIRY)


def _count(key: str, period: int) -> int:
    """Count one request in `key`'s window and return the window's total.

    On Redis: one round trip (a script that increments the counter and gives a new window its
    expiry). If Redis cannot be reached the request is let through (throttling protects the
    service; it must not take it down). Without Redis (the embedded demo): the default cache,
    add-then-incr."""
    if settings.REDIS_URL:
        try:
            return int(_incr_with_expiry()(keys=[f"qm-throttle:{key}"], args=[period + 1]))
        except Exception as error:  # noqa: BLE001 - any Redis failure: let the request in, say so
            log.warning("throttle counter unavailable; request allowed", error=str(error))
            return 0
    store = caches["default"]
    store.add(key, 0, timeout=period + 1)
    try:
        return int(store.incr(key))
    except ValueError:  # expired between add and incr: this request opens the window
        store.add(key, 1, timeout=period + 1)
        return 1


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
        if _count(key, period) > limit:
            self._retry_after = (window + 1) * period - now
            return False
        return True

    def wait(self) -> float | None:
        return self._retry_after


class PerUserThrottle(FixedWindowThrottle):
    scope = "user"


def client_address(request: Any) -> str:
    """The address a request came from: the connection's, or behind QM_TRUSTED_PROXIES proxies
    the one they recorded (REST_FRAMEWORK["NUM_PROXIES"]); an X-Forwarded-For a client writes
    itself is not believed. A DRF or a Django request."""
    return str(BaseThrottle().get_ident(request))


class LoginThrottle(FixedWindowThrottle):
    """Sign-ins per client address (`client_address`): the API's token requests and the pages'
    and the admin's sign-in forms count against one counter (`sign_in_refused`)."""

    scope = "login"

    def ident(self, request: Request) -> str | None:
        return f"ip{client_address(request)}"


def sign_in_refused(request: Any) -> float | None:
    """Count a sign-in form's POST against its address's login counter: None when it may go on,
    else the seconds until the window ends (a Django request: the forms are no DRF views)."""
    throttle = LoginThrottle()
    if throttle.allow_request(request, None):  # type: ignore[arg-type]
        return None
    return max(1.0, throttle.wait() or 1.0)


# A username's failed sign-ins in the last period, in one round trip: the ones older than the
# period dropped, this one added (ARGV[3] == '1'), and how many remain with the oldest's time.
_SLIDING_FAILURES = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[1], tonumber(ARGV[1]), ARGV[4])
  redis.call('EXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2])) + 1)
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {redis.call('ZCARD', KEYS[1]), oldest[2] or ''}
"""


@cache
def _sliding_failures() -> Any:
    return _redis().register_script(_SLIDING_FAILURES)


def _username_key(username: str) -> str:
    """One counter per username however it is cased (a name any characters long, hashed)."""
    return "login_user:" + hashlib.sha256(username.casefold().encode("utf-8", "surrogatepass")).hexdigest()[:40]


def _failures(key: str, scope: str, *, record: bool, now: float | None = None) -> tuple[int, float | None, int, int]:
    """(failures counted in `key` in the window, the oldest one's time, the limit, the period) at
    `scope`'s rate, recording one more when `record`. Redis unreachable: none (a throttle must
    not take sign-in, or the agents, down)."""
    limit, period = parse_rate(api_settings.DEFAULT_THROTTLE_RATES.get(scope) or DEFAULT_RATES[scope])
    now = time.time() if now is None else now
    if settings.REDIS_URL:
        try:
            count, oldest = _sliding_failures()(keys=[f"qm-throttle:{key}"],
                                                args=[now, period, "1" if record else "0", uuid.uuid4().hex])
        except Exception as error:  # noqa: BLE001 - any Redis failure: let the attempt go on, say so
            log.warning("failure counter unavailable; attempt allowed", scope=scope, error=str(error))
            return 0, None, limit, period
        return int(count), float(oldest) if oldest else None, limit, period
    store = caches["default"]  # the embedded demo: one process, a list of times
    times = [t for t in store.get(key, []) if t > now - period]
    if record:
        times.append(now)
        store.set(key, times, timeout=period + 1)
    return len(times), min(times, default=None), limit, period


def sign_in_failed(username: str, *, now: float | None = None) -> None:
    """Count a failed sign-in against its username (the `user_login_failed` signal's receiver,
    controlplane/signals.py): the API's token requests and both forms authenticate through it."""
    _failures(_username_key(username), "login_user", record=True, now=now)


def username_refused(username: str, *, now: float | None = None) -> float | None:
    """None when `username` may try to sign in now, else the seconds until its oldest failure in
    the window leaves it. A sliding window of failures, not a lockout: a refused attempt is not
    counted, so the refusal ends at most one period after the failures stop, and each failure
    that ages out lets one attempt through."""
    return _refused(_username_key(username), "login_user", now)


def _refused(key: str, scope: str, now: float | None) -> float | None:
    """None when `key` has fewer failures in its window than `scope`'s limit, else the seconds
    until the oldest of them leaves the window."""
    now = time.time() if now is None else now
    count, oldest, limit, period = _failures(key, scope, record=False, now=now)
    if count < limit or oldest is None:
        return None
    return max(1.0, oldest + period - now)


def username_refusal(wait: float) -> str:
    return (f"Too many failed sign-ins for this username; try again in {math.ceil(wait)} s "
            "(or sign in as someone else).")


def _agent_key(request: Any) -> str:
    return "agent_auth:" + client_address(request)


def agent_auth_failed(request: Any, *, now: float | None = None) -> None:
    """Count a node agent's failed authentication (a token that is neither a node's nor the
    bootstrap secret) against the address it came from (api/agent.py)."""
    _failures(_agent_key(request), "agent_auth", record=True, now=now)


def agent_auth_refused(request: Any, *, now: float | None = None) -> float | None:
    """None when the address `request` came from may present an agent token that is not a
    node's now (the bootstrap secret, or a guess), else the seconds until its oldest failure in
    the window leaves it. A sliding window of failures (`agent_auth`, QM_AGENT_AUTH_FAILURES),
    as `username_refused`'s: only failures count, so a fleet of healthy agents behind one
    address is never refused, and a refused attempt is not counted."""
    return _refused(_agent_key(request), "agent_auth", now)


def agent_auth_refusal(wait: float) -> str:
    return (f"Too many failed agent authentications from this address; try again in {math.ceil(wait)} s "
            "(check the node's token and QM_AGENT_BOOTSTRAP_TOKEN).")
