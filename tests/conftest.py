"""Suite-wide fixtures. The Django tests run against the real PostgreSQL that `make test` starts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from controlplane.agent.containment import CGROUP_V2_MOUNTS
from tests.xdist_isolation import copy_migrated_database


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, request: pytest.FixtureRequest, django_db_blocker: Any
) -> None:
    """pytest-django's (a worker's database name ends in its id), and under xdist the worker's
    database is copied from one a single worker migrated, not migrated again by each
    (tests/xdist_isolation.py)."""
    copy_migrated_database(request.config, django_db_blocker)


@pytest.fixture(autouse=True)
def _no_sign_in_failures_from_other_tests() -> Iterator[None]:
    """Each test starts with no failed sign-ins counted against any username, no sign-ins
    against any address, and no failed agent authentications against any address: the counters
    (api/throttling.py, `login_user`, 20 an hour; `login`, 30 a minute; `agent_auth`, 60 a
    minute) live in the run's Redis, not in the test's database transaction, and tests that type
    wrong passwords for alice or admin, sign in many times, or send agent tokens that are refused
    (all from 127.0.0.1), would otherwise add up to a 429 in a later test (a worker's browser test
    was refused its admins' sign-in on 6 Dec, after other tests' sign-ins in the same minute)."""
    try:
        from django.conf import settings

        if getattr(settings, "REDIS_URL", ""):
            from controlplane.api.throttling import _redis

            patterns = ("qm-throttle:login_user:*", "qm-throttle:login:*", "qm-throttle:agent_auth:*")
            stale = [key for pattern in patterns for key in _redis().scan_iter(match=pattern, count=1000)]
            if stale:
                _redis().delete(*stale)
    except Exception:  # noqa: BLE001 - no Django or no Redis in this run: nothing was counted there
        pass
    yield


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Remove the empty run-cgroup parents the suite's real agents made (one per state
    directory, containment.py): a node keeps one for good, a test run made hundreds. A parent
    another worker still uses holds run cgroups and stays; one emptied between its runs is made
    again at its next launch."""
    for mount in CGROUP_V2_MOUNTS:
        try:
            parents = [p for p in mount.iterdir() if p.name.startswith("qm-agent-")]
        except OSError:
            continue
        for parent in parents:
            try:
                parent.rmdir()
            except OSError:
                pass
