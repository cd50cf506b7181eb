"""Fixtures for the node-agent tests: the loop fleet, the bootstrap secret, a state directory
jobs run as users of their own can pass through, a submitter for their jobs, and the check that
a test leaves no session on the test database behind it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from tests.controlplane.database_sessions import no_session_left_on_the_test_database  # noqa: F401 - autouse
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, build_loop_fleet


@pytest.fixture(autouse=True)
def _bootstrap_secret(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@pytest.fixture
def fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()


@pytest.fixture
def submitter(db: Any) -> Any:
    """Who submitted the jobs a real agent runs: a root agent runs each job as its submitter by
    default (`--job-user user`), and a run with none fails to launch. The API never makes a job
    without one; make_job does, unless given this."""
    return get_user_model().objects.create_user(username="submitter")


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A state directory the jobs' own users (`--job-user team` or `user`, a root agent's
    default) can pass through (pytest's tmp_path is 0700: a root agent refuses to start there)."""
    made = Path(tempfile.mkdtemp(prefix="qm-agent-state-"))
    os.chmod(made, 0o711)
    yield made
    shutil.rmtree(made, ignore_errors=True)
