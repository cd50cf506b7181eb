"""A small key-value store with a time-to-live that every web worker shares: Redis when the
deployment has it (REDIS_URL), else Django's cache (the embedded demo's single process). The
what-if replays keep their progress and results here, the teams page its days of bins, the job
page its queue order, and the job page and the API's explain the fleet's ETA record
(services/eta_record.py `fleet_record`).

Its users cache what they can compute again, so while Redis is away a read is a miss and a write
is skipped (logged): the pages go on, computing afresh. `add` is not so forgiving: the what-if
replays take a lock with it, which cannot be faked, so it raises StoreUnreachable, which the page
turns into a 503 that says so. `delete` releases that lock, which expires on its own: it logs."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Sequence
from typing import Any

import structlog
from django.conf import settings
from django.core.cache import cache

log = structlog.get_logger(__name__)


def _redis_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


class StoreUnreachable(Exception):
    """Redis did not answer an operation that cannot be skipped (taking a lock)."""

    def __init__(self, key: str, error: BaseException) -> None:
        super().__init__(f"the shared store (Redis) is unreachable, so {key!r} could not be taken: {error}")
        self.key = key


class Store:
    """get/set/add/delete/get_many with a time-to-live, on Redis or on Django's cache."""

    def __init__(self) -> None:
        self.redis = None
        if settings.REDIS_URL:
            import redis

            self.redis = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2.0, socket_connect_timeout=2.0)

    def get(self, key: str) -> Any:
        """The value, or None when absent (or Redis is away: a miss)."""
        if self.redis is None:
            return cache.get(key)
        try:
            raw = self.redis.get(key)
        except _redis_errors() as error:
            log.warning("shared store unreachable; read as a miss", key=key, error=str(error))
            return None
        return None if raw is None else pickle.loads(raw)

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The keys that are present, with their values (one round trip; none while Redis is away)."""
        if self.redis is None:
            return dict(cache.get_many(keys))
        try:
            raws = self.redis.mget(keys)
        except _redis_errors() as error:
            log.warning("shared store unreachable; read as a miss", keys=len(keys), error=str(error))
            return {}
        return {key: pickle.loads(raw) for key, raw in zip(keys, raws, strict=True) if raw is not None}

    def set(self, key: str, value: Any, ttl: int) -> None:
        """Keep `value` for `ttl` seconds (not kept while Redis is away)."""
        if self.redis is None:
            cache.set(key, value, ttl)
            return
        try:
            self.redis.set(key, pickle.dumps(value), ex=ttl)
        except _redis_errors() as error:
            log.warning("shared store unreachable; not kept", key=key, error=str(error))

    def add(self, key: str, value: Any, ttl: int) -> bool:
        """Keep `value` unless `key` is present: True when kept (StoreUnreachable while Redis is away)."""
        if self.redis is None:
            return bool(cache.add(key, value, ttl))
        try:
            return bool(self.redis.set(key, pickle.dumps(value), ex=ttl, nx=True))
        except _redis_errors() as error:
            raise StoreUnreachable(key, error) from error

    def delete(self, key: str) -> None:
        """Forget `key` (while Redis is away it stays until its time-to-live ends)."""
        if self.redis is None:
            cache.delete(key)
            return
        try:
            self.redis.delete(key)
        except _redis_errors() as error:
            log.warning("shared store unreachable; not forgotten", key=key, error=str(error))

    def delete_prefix(self, prefix: str) -> None:
        """Forget every key under `prefix` (Redis; on Django's cache, the whole cache)."""
        if self.redis is None:
            cache.clear()
        else:
            for key in self.redis.scan_iter(match=prefix + "*"):
                self.redis.delete(key)


@functools.lru_cache(maxsize=1)
def shared_store() -> Store:
    """One store per process, so its Redis connection pool is reused across requests."""
    return Store()
