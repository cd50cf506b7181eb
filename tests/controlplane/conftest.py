from __future__ import annotations

import pytest
from django.db import connection


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
