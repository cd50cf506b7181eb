from __future__ import annotations

import fcntl
import getpass
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="session")
def _real_postgresql(django_db_setup, django_db_blocker) -> None:  # type: ignore[no-untyped-def]
    """The control plane is tested against PostgreSQL, never a stand-in: run via `make test`."""
    with django_db_blocker.unblock():
        if connection.vendor != "postgresql":
            pytest.exit(
                f"tests/controlplane need PostgreSQL (got {connection.vendor}); run `make test`, "
                "which starts a throwaway server and sets DATABASE_URL",
                returncode=2,
            )


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    """Passwords hashed with a test's work factor (tests/controlplane/fast_hasher.py); the api,
    cli and accounting folders' own fixtures choose MD5 over this."""
    settings.PASSWORD_HASHERS = [
        "tests.controlplane.fast_hasher.FastPBKDF2PasswordHasher",
        *settings.PASSWORD_HASHERS,
    ]


@pytest.fixture(autouse=True)
def _fresh_eta_record() -> None:
    """The fleet's ETA record is kept a minute in the shared store (Redis in the suite) for the
    API's explain and the job page (services/eta_record.py fleet_record): each test reads its own."""
    from controlplane.services import eta_record
    from controlplane.shared_store import shared_store

    shared_store().delete(eta_record.FLEET_RECORD_KEY)


# The admin UI's tests (tests/controlplane/test_admin_*.py, test_cohort_audit.py); the API, CLI,
# agent and accounting folders define their own `fleet`.
@pytest.fixture
def fleet(db: Any) -> Fleet:
    return build_fleet()


@pytest.fixture
def browser(fleet: Fleet) -> Client:
    """A superuser (boss) signed in to the admin UI."""
    f.make_user("boss", superuser=True)
    client = Client()
    assert client.login(username="boss", password="boss")
    return client


@pytest.fixture
def boss(browser: Client) -> Client:
    """`browser` by the name the user-audit tests give the acting admin."""
    return browser


@pytest.fixture
def in_a_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as the audit sees a `manage.py shell` run by OS user ops: its events end
    "manage.py shell, run as OS user ops: no page or command said who)"."""
    monkeypatch.setattr(sys, "argv", ["/srv/qm/manage.py", "shell"])
    monkeypatch.setattr(getpass, "getuser", lambda: "ops")


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file with every migration applied, made once for the whole run: the tests that run
    the product on SQLite in a subprocess (the demo's database) each copy it to a file of their own
    instead of migrating one from scratch, 7 s on a quiet machine and up to 84 s under load, three
    times a run. The copy is the file migrating makes; the tests' own ``migrate`` finds nothing
    to apply. Under xdist the workers share the run's directory and the first to ask migrates
    while the others wait on the lock."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's directory, above each worker's own
    template = root / "migrated.sqlite3"
    with open(root / "migrated.sqlite3.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not template.exists():
            partial = root / f"migrated.sqlite3.{os.getpid()}"
            env = {**os.environ, "DATABASE_URL": f"sqlite:///{partial}",
                   "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
            done = subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=REPO,
                                  env=env, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
            os.replace(partial, template)
    return template
