"""Fixtures for the page tests: the demo fleet (16 nodes, three teams, four priority classes,
users alice (vision), bob (language), finn (finance) and admin, passwords = usernames), signed-in
clients per role, and builders for the stored time series the charts read."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import FleetSample, Job
from controlplane.services.jobs import SubmitRequest, submit
from tests.controlplane.fleet_fixture import GENEROUS_THROTTLE_RATES
from tests.frontend.page_data import sample

ROLES = ("alice", "bob", "finn", "admin")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    """The demo fleet sets four passwords per test; PBKDF2's deliberate slowness buys nothing here."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _generous_sign_in_throttle(settings: Any) -> None:
    """The browser tests sign in through the page's form, which counts against the client
    address's login counter as the API's token requests do (frontend/views/accounts.py): a
    worker's busy minute of them must not meet the limit (the throttling tests set their own)."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": GENEROUS_THROTTLE_RATES}


@pytest.fixture(autouse=True)
def _fresh_team_bins() -> None:
    """The teams page keeps finished days' bins in the shared store (Redis in the suite), the job
    page the fleet's ETA record and queue order: each test starts without another test's."""
    from controlplane.shared_store import shared_store

    shared_store().delete_prefix("qm:team-bins:")
    shared_store().delete_prefix("qm:eta-record:")  # the job page's ETA record, kept a minute
    shared_store().delete_prefix("qm:queue-order")  # the job page's queue order, kept 5 s


@pytest.fixture
def demo(db: None) -> None:
    seed_demo_fleet()


@pytest.fixture
def client_for(demo: None) -> Callable[[str], Client]:
    def make(username: str) -> Client:
        client = Client()
        client.force_login(get_user_model().objects.get(username=username))
        return client

    return make


@pytest.fixture
def submit_as(demo: None) -> Callable[..., Job]:
    """Submit one job through the submit service, as a named demo user."""

    def make(username: str, **fields: Any) -> Job:
        user = get_user_model().objects.get(username=username)
        fields.setdefault("name", "job")
        fields.setdefault("gpus", 8)
        return submit(user, SubmitRequest(**fields)).job

    return make


@pytest.fixture
def samples(demo: None) -> Callable[..., list[FleetSample]]:
    """`count` samples ending now, `every` apart, oldest first."""

    def make(count: int, every: timedelta = timedelta(seconds=5), **fields: Any) -> list[FleetSample]:
        now = timezone.now()
        return [sample(now - every * (count - 1 - i), **fields) for i in range(count)]

    return make
