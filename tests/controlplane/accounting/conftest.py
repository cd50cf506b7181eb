"""Fixtures for the accounting API tests: the shared small fleet and a client per role."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.controlplane.accounting.priced_runs import priced_fleet
from tests.controlplane.fleet_fixture import GENEROUS_THROTTLE_RATES, ROLES, Fleet, build_fleet, client_for


@pytest.fixture
def _generous_throttles(settings: Any) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": GENEROUS_THROTTLE_RATES}


@pytest.fixture
def fleet(db: Any, settings: Any, _generous_throttles: None) -> Fleet:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return build_fleet()


@pytest.fixture
def clients(fleet: Fleet) -> dict[str, APIClient]:
    return {role: client_for(fleet, role) for role in ROLES}


@pytest.fixture
def priced(db: Any) -> dict[str, Any]:
    """Two GPU types, H100 on-demand repriced twice (priced_runs.priced_fleet)."""
    return priced_fleet()
