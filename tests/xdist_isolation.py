"""Each pytest-xdist worker gets a Redis database of its own, and a PostgreSQL test database
copied from one that a single worker migrated.

`make test` runs the suite on several workers (scripts/run-tests.sh). pytest-django gives each
worker its own PostgreSQL test database (``test_quartermaster_gw0``, ...). Redis is the Celery
broker, and a test that empties it (``flushdb``) or a real Celery worker consuming from it would
otherwise take the other worker's messages. Loaded with ``-p`` (pyproject's addopts), so it runs
before pytest-django reads the settings, which read ``REDIS_URL`` once; the subprocesses tests
start (agents, Celery workers, servers) inherit it.

Each worker used to build its database by running every migration, all of them at once on the
machine's two cores (up to 30 s a worker under load). Now the first worker to need a database
migrates one, ``test_<NAME>_migrated``, while the others wait on a PostgreSQL advisory lock; every
worker's own database is then made from it with ``CREATE DATABASE ... TEMPLATE`` (Django's
``TEST["TEMPLATE"]`` setting), whose ``migrate`` finds nothing left to apply. The migrated
database carries the run's id (xdist's ``testrunuid``) as its comment, so one left by a killed
run is rebuilt, not trusted; the controller drops it when the workers are done.

``make test`` then runs the chaos tests serially, in a second pytest (scripts/run-tests.sh). It
used to migrate its own database from scratch; now run-tests.sh names the whole run in
``QM_TEST_RUN`` (a fresh id each time), which both pytests use as the run's id in place of
xdist's: the controller leaves the migrated database for the serial run, which makes its database
from it as a worker does (migrating it first if it is missing or another run's) and drops it
when it ends. Any other serial run, and ``--reuse-db`` / ``--nomigrations``, are pytest-django's
own.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _worker.startswith("gw") and os.environ.get("REDIS_URL"):
    _parts = urlsplit(os.environ["REDIS_URL"])
    # database 0 stays the serial run's; gw0 → 1, gw1 → 2 (Redis has 16 by default)
    os.environ["REDIS_URL"] = urlunsplit(_parts._replace(path=f"/{int(_worker[2:]) + 1}"))


def migrated_database_name(settings_dict: dict[str, Any]) -> str:
    """The database the workers' own are copied from: pytest-django's name without the worker."""
    from django.db.backends.base.creation import TEST_DATABASE_PREFIX

    return f"{TEST_DATABASE_PREFIX}{settings_dict['NAME']}_migrated"


#: Set by scripts/run-tests.sh for both of its pytests: the one run they make together.
RUN_VARIABLE = "QM_TEST_RUN"


def run_id(config: pytest.Config) -> str:
    """The id the migrated database is made for: run-tests.sh's for both its pytests, else an
    xdist run's own; empty in any other serial run, which migrates its database itself."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None and not config.pluginmanager.hasplugin("dsession"):
        return os.environ.get(RUN_VARIABLE, "")
    return os.environ.get(RUN_VARIABLE) or (workerinput or {}).get("testrunuid", "")


def copy_migrated_database(config: pytest.Config, blocker: Any) -> None:
    """In an xdist worker, or run-tests.sh's serial run, on PostgreSQL: make sure this run's
    migrated database exists (migrating it if this process is the first), and have pytest-django
    create the process's own database from it. Called from tests/conftest.py's
    ``django_db_modify_db_settings``, before pytest-django's ``django_db_setup`` creates the
    databases."""
    run = run_id(config)
    if not run or config.getvalue("reuse_db") or config.getvalue("nomigrations"):
        return
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    migrated = migrated_database_name(connection.settings_dict)
    with blocker.unblock(), connection.creation._nodb_cursor() as lock:
        # Session-level and on its own connection: released when this worker ends, however it ends.
        lock.execute("SELECT pg_advisory_lock(hashtext(%s))", [migrated])
        try:
            lock.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
                         [migrated])
            found = lock.fetchone()
            if found is None or found[0] != run:
                _migrate(connection, migrated)
                lock.execute(f"COMMENT ON DATABASE {connection.ops.quote_name(migrated)} IS %s", [run])
        finally:
            lock.execute("SELECT pg_advisory_unlock(hashtext(%s))", [migrated])
    connection.settings_dict["TEST"]["TEMPLATE"] = migrated


def _migrate(connection: Any, migrated: str) -> None:
    """Django's own test database creation (every migration, then post_migrate's content types and
    permissions), under the migrated database's name; the settings are the worker's again after."""
    from django.conf import settings

    test_settings = connection.settings_dict["TEST"]
    own, name = test_settings["NAME"], connection.settings_dict["NAME"]
    test_settings["NAME"] = migrated
    try:
        # autoclobber: a database of that name left by a killed run is dropped, not asked about
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    finally:
        # CREATE DATABASE ... TEMPLATE refuses a template anyone is connected to
        connection.close()
        test_settings["NAME"] = own
        settings.DATABASES[connection.alias]["NAME"] = connection.settings_dict["NAME"] = name


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controller drops the migrated database once every worker has ended (their own
    databases are dropped by pytest-django in each worker), unless run-tests.sh's serial run is
    to use it next; that serial run drops it when it ends."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    if config.pluginmanager.hasplugin("dsession"):
        if os.environ.get(RUN_VARIABLE):
            return
    elif not os.environ.get(RUN_VARIABLE):
        return
    from django.conf import settings

    if not settings.configured:
        return
    from django.db import DatabaseError, connection
    from pytest_django.plugin import blocking_manager_key

    if connection.vendor != "postgresql":
        return
    migrated = migrated_database_name(connection.settings_dict)
    try:
        with config.stash[blocking_manager_key].unblock(), connection.creation._nodb_cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(migrated)}")
    except DatabaseError as error:  # PostgreSQL gone: test-services.sh throws its cluster away anyway
        config.get_terminal_writer().line(f"xdist_isolation: {migrated} not dropped: {error}")


#: Set by scripts/run-tests.sh: the file where the workers list the files holding the tests they
#: left out as chaos tests, the serial run's to collect instead of the whole suite.
SERIAL_FILES_VARIABLE = "QM_TEST_SERIAL_FILES"
_left_out: set[str] = set()


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Note the files of the chaos tests a worker's ``-m "not chaos"`` leaves out. Collecting the
    whole suite again for the serial run took 65-80 s at a load of 11-15 (its two files: 11-25 s),
    7 s on a quiet machine; every worker collects it all anyway, and knows by the marker itself
    (not by a guess at file names) where the chaos tests are."""
    if os.environ.get(SERIAL_FILES_VARIABLE) and os.environ.get("PYTEST_XDIST_WORKER"):
        _left_out.update(item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("chaos"))


def pytest_collection_finish(session: pytest.Session) -> None:
    target = os.environ.get(SERIAL_FILES_VARIABLE)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not target or not worker:
        return
    # Every worker collects the same suite and writes the same list: whole, by rename, so the
    # serial run never reads half of one.
    partial = f"{target}.{worker}"
    with open(partial, "w") as listing:
        listing.writelines(f"{path}\n" for path in sorted(_left_out))
    os.replace(partial, target)
