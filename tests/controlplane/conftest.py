from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client

from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet


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
