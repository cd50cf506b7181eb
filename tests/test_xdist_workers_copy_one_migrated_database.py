"""Under pytest-xdist (`make test`), a worker's PostgreSQL test database is a copy of the one
database a single worker migrated for the run (tests/xdist_isolation.py), not migrated again."""

from __future__ import annotations

import pytest
from django.db import connection


@pytest.mark.django_db
def test_this_workers_database_was_made_from_this_runs_migrated_database(request: pytest.FixtureRequest) -> None:
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is None or connection.vendor != "postgresql":
        pytest.skip("a serial run, or SQLite, migrates its one test database itself")
    migrated = connection.settings_dict["TEST"].get("TEMPLATE")
    assert migrated and migrated.endswith("_migrated"), connection.settings_dict["TEST"]
    with connection.cursor() as cursor:
        # pg_database is shared: read from here, since a session on the migrated database would
        # stop a worker still copying it
        cursor.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                       [migrated])
        assert cursor.fetchall() == [(workerinput["testrunuid"],)]  # this run's, not a killed run's
