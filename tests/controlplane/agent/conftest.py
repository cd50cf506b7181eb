"""Fixtures for the node-agent tests: the loop fleet, the bootstrap secret, a state directory
jobs run as users of their own can pass through, and the check that a test leaves no session on
the test database behind it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controlplane.services import agent_wakeups
from tests.controlplane.database_sessions import no_session_left_behind
from tests.controlplane.loop_fixtures import BOOTSTRAP, LoopFleet, build_loop_fleet


@pytest.fixture(autouse=True)
def _no_session_left_on_the_test_database(request: pytest.FixtureRequest, django_db_blocker: Any) -> Iterator[None]:
    """After each test that used the database: no other session on it (database_sessions.py).
    These tests run live servers, real agents and threads of their own; a session one of them
    left open made pytest-django's drop of the database fail at the end of the run, as a
    warning naming no test. Checked once the test's own fixtures (its agents, its servers)
    are torn down: this fixture is set up before them.

    The live server's long polls are answered first. A real agent started without
    `--no-wake` holds one (POST nodes/wait, up to 20 s) on a request thread of the live server,
    which keeps its database connection while it waits (api/agent.py); the agent stopped, the
    thread went on waiting for a client that had gone, and with it the session, past the test
    and, after the run's last one, past the drop. Answered, each writes its reply to the closed
    socket and ends, closing its connection (Django's threaded server closes a request
    thread's connections when its client's socket is done); it also gives back the place it
    held among this process's AGENT_MAX_WAITS, which the next test's agent would otherwise
    find taken."""
    yield
    _answer_the_waits()
    if "_django_db_helper" not in request.fixturenames:
        return  # no test database was set up for it
    with django_db_blocker.unblock():
        # answered again before each look: a wait its agent sent just before it stopped may
        # have registered after the first answer
        no_session_left_behind(before_each_look=_answer_the_waits)


def _answer_the_waits() -> None:
    """Answer every long poll the live server holds in this process (agent_wakeups' hub): the
    test is over, and this process has no other client."""
    if agent_wakeups._wake_hub is not None:
        agent_wakeups._wake_hub._notify(None)


@pytest.fixture(autouse=True)
def _bootstrap_secret(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@pytest.fixture
def fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A state directory the jobs' own users (`--job-user team` or `user`) can pass through
    (pytest's tmp_path is 0700)."""
    made = Path(tempfile.mkdtemp(prefix="qm-agent-state-"))
    os.chmod(made, 0o711)
    yield made
    shutil.rmtree(made, ignore_errors=True)
