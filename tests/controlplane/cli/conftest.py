"""Fixtures for the `qm` tests: a live server (pytest-django's, in a thread of this process) over
the shared small fleet, and a runner that calls `qm` as a real process of its own with its own
HOME: forked from one that has imported the CLI already (qm_forkserver.py), which runs the call
as `python -m controlplane.cli.main` would, without ~0.4 s of interpreter start each time
(QM_TEST_FORKSERVER=0: a fresh interpreter for every call, as before). Each test leaves no
session on the test database behind it (database_sessions.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane.cli.qm_forkserver import ForkServer
from tests.controlplane.database_sessions import no_session_left_on_the_test_database  # noqa: F401 - autouse
from tests.controlplane.fleet_fixture import GENEROUS_THROTTLE_RATES, Fleet, build_fleet

REPO = Path(__file__).resolve().parents[3]


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture(autouse=True)
def _test_settings(settings: Any) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": GENEROUS_THROTTLE_RATES}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fleet(transactional_db: Any) -> Fleet:
    return build_fleet()


@pytest.fixture(scope="session")
def qm_forkserver() -> Iterator[ForkServer]:
    server = ForkServer({**os.environ, "PYTHONPATH": str(REPO)}, REPO)
    yield server
    server.close()


@pytest.fixture
def qm(live_server: Any, tmp_path: Path, qm_forkserver: ForkServer) -> Callable[..., Run]:
    """`qm(*args, stdin=...)` runs `python -m controlplane.cli.main` against the live server."""
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "QM_URL": live_server.url,
        "PYTHONPATH": str(REPO),
    }
    env.pop("QM_TOKEN", None)
    # A terminal's width exported by the shell running the tests would cut the tables' names.
    env.pop("COLUMNS", None)

    def run(*args: str, stdin: str | None = None, url: str | None = None, extra_env: dict[str, str] | None = None) -> Run:
        call_env = dict(env, QM_URL=url) if url else dict(env)
        call_env.update(extra_env or {})
        forked = None if os.environ.get("QM_TEST_FORKSERVER") == "0" else qm_forkserver.run(
            list(args), call_env, stdin, timeout=60)
        if forked is not None:
            return Run(*forked)
        done = subprocess.run(
            [sys.executable, "-m", "controlplane.cli.main", *args], input=stdin, capture_output=True,
            text=True, env=call_env, cwd=REPO, timeout=60,
        )
        return Run(done.returncode, done.stdout, done.stderr)

    run.env = env  # type: ignore[attr-defined]  # for a test that starts qm itself (Popen)
    return run


@pytest.fixture
def alice_qm(qm: Callable[..., Run], fleet: Fleet) -> Callable[..., Run]:
    assert qm("login", "--username", "alice", "--password-stdin", stdin="alice\n").code == 0
    return qm
