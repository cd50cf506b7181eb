"""Fixtures for the API tests: the shared small fleet (see tests/controlplane/fleet_fixture.py)
and one API client per role."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.controlplane.fleet_fixture import GENEROUS_THROTTLE_RATES, ROLES, Fleet, build_fleet, client_for


@pytest.fixture(autouse=True)
def _generous_throttles(settings: Any) -> None:
    """Rates high enough that no test but the throttling ones meets a limit (the counters live
    in Redis and outlast a test)."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": GENEROUS_THROTTLE_RATES}


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    """The fixture fleet creates four users per test; the production hasher's million rounds
    would dominate the suite's time without testing anything of ours."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fleet(db: Any) -> Fleet:
    return build_fleet()


@pytest.fixture
def clients(fleet: Fleet) -> dict[str, APIClient]:
    return {role: client_for(fleet, role) for role in ROLES}


@pytest.fixture
def alice(clients: dict[str, APIClient]) -> APIClient:
    return clients["owner"]


@pytest.fixture
def admin(clients: dict[str, APIClient]) -> APIClient:
    return clients["admin"]
