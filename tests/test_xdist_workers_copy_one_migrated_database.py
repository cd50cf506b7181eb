"""Under pytest-xdist (`make test`), a worker's PostgreSQL test database is a copy of the one
database a single worker migrated for the run (tests/xdist_isolation.py), not migrated again; so is
the serial chaos run's database that follows in `make test` (scripts/run-tests.sh names both runs
one run in QM_TEST_RUN)."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.xdist_isolation import run_id


@pytest.mark.django_db
def test_this_processs_database_was_made_from_this_runs_migrated_database(request: pytest.FixtureRequest) -> None:
    run = run_id(request.config)
    if not run or connection.vendor != "postgresql":
        pytest.skip("a serial run outside run-tests.sh, or SQLite, migrates its one test database itself")
    migrated = connection.settings_dict["TEST"].get("TEMPLATE")
    assert migrated and migrated.endswith("_migrated"), connection.settings_dict["TEST"]
    with connection.cursor() as cursor:
        # pg_database is shared: read from here, since a session on the migrated database would
        # stop a worker still copying it
        cursor.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                       [migrated])
        assert cursor.fetchall() == [(run,)]  # this run's, not a killed run's
