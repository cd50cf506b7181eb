"""Each pytest-xdist worker gets a Redis database of its own.

`make test` runs the suite on several workers (scripts/run-tests.sh). pytest-django already gives
each worker its own PostgreSQL test database (``test_quartermaster_gw0``, ...); Redis is the
Celery broker, and a test that empties it (``flushdb``) or a real Celery worker consuming from
it would otherwise take the other worker's messages. Loaded with ``-p`` (pyproject's addopts),
so it runs before pytest-django reads the settings, which read ``REDIS_URL`` once; the
subprocesses tests start (agents, Celery workers, servers) inherit it.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit, urlunsplit

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and os.environ.get("REDIS_URL"):
    _parts = urlsplit(os.environ["REDIS_URL"])
    # database 0 stays the serial run's; gw0 → 1, gw1 → 2 (Redis has 16 by default)
    os.environ["REDIS_URL"] = urlunsplit(_parts._replace(path=f"/{int(_worker[2:]) + 1}"))
