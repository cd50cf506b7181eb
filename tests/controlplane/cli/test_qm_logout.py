"""`qm logout` revokes the token on the server, then forgets it locally; when the server cannot
be asked (unreachable, or the token is already dead) it still forgets it and says so.

Found by QA: `qm logout` only deleted the local copy; the token kept working on the server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import requests

from controlplane.models import ApiToken
from tests.controlplane.cli.conftest import REPO

pytestmark = pytest.mark.slow


def _config(tmp_path: Path) -> Path:
    return tmp_path / "config" / "quartermaster" / "config.json"


def _me(live_server: Any, token: str) -> int:
    return requests.get(f"{live_server.url}/api/v1/auth/me/", headers={"Authorization": f"Token {token}"},
                        timeout=30).status_code


def test_logout_revokes_the_token_on_the_server_and_forgets_it(alice_qm, live_server, tmp_path) -> None:
    token = json.loads(_config(tmp_path).read_text())["token"]
    assert _me(live_server, token) == 200

    r = alice_qm("logout")

    assert r.code == 0, r.err
    assert "revoked" in r.out and "other logins keep their own tokens" in r.out and str(_config(tmp_path)) in r.out
    assert "token" not in json.loads(_config(tmp_path).read_text())
    assert _me(live_server, token) == 401
    who = alice_qm("whoami")
    assert who.code == 1 and "Run `qm login` first" in who.err


def test_logout_leaves_the_users_other_clients_logged_in(alice_qm, live_server, tmp_path) -> None:
    # A second machine of alice's: its own HOME, the same server; its login gets its own token.
    other_home = tmp_path / "laptop"
    env = {**os.environ, "HOME": str(other_home), "XDG_CONFIG_HOME": str(other_home / "config"),
           "QM_URL": live_server.url, "PYTHONPATH": str(REPO)}
    env.pop("QM_TOKEN", None)

    def laptop(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "controlplane.cli.main", *args], input=stdin,
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=60)

    assert laptop("login", "--username", "alice", "--password-stdin", stdin="alice\n").returncode == 0
    assert laptop("whoami").returncode == 0

    assert alice_qm("logout").code == 0

    still = laptop("whoami")
    assert still.returncode == 0 and "alice" in still.stdout, still.stderr


def test_logout_with_the_server_unreachable_still_forgets_the_token(alice_qm, live_server, tmp_path) -> None:
    config = _config(tmp_path)
    stored = json.loads(config.read_text())
    token = stored["token"]
    config.write_text(json.dumps({**stored, "url": "http://127.0.0.1:9"}))

    r = alice_qm("logout")

    assert r.code == 0, r.err
    assert "cannot reach http://127.0.0.1:9" in r.err and "NOT revoked" in r.err and "Traceback" not in r.err
    assert "token" not in json.loads(config.read_text())
    assert _me(live_server, token) == 200  # as the message says: still valid on the server


def test_logout_with_a_token_the_server_no_longer_knows_still_forgets_it(alice_qm, tmp_path) -> None:
    ApiToken.objects.all().delete()  # an admin revoked it, or her password changed

    r = alice_qm("logout")

    assert r.code == 0, r.err
    assert "already invalid" in r.out and "Traceback" not in r.err
    assert "token" not in json.loads(_config(tmp_path).read_text())


def test_logout_when_not_logged_in_says_so(qm, fleet) -> None:
    r = qm("logout")

    assert r.code == 0, r.err
    assert "Not logged in" in r.out


def test_logout_that_cannot_remove_the_stored_token_exits_1(alice_qm, tmp_path) -> None:
    config = _config(tmp_path)
    config.unlink()
    config.mkdir()  # something that is not a file, and that logout cannot remove as one

    r = alice_qm("logout")

    assert r.code == 1 and "could not remove" in r.err and "Traceback" not in r.err


def test_logout_removes_a_config_file_it_cannot_read(alice_qm, tmp_path) -> None:
    config = _config(tmp_path)
    config.write_text("{not json")

    r = alice_qm("logout")

    assert r.code == 0, r.err
    assert not config.exists() and "token removed" in r.out


def test_a_new_login_revokes_the_token_of_the_login_it_replaces_here(alice_qm, qm, live_server, tmp_path) -> None:
    """Each login has its own token: without this, every `qm login` on one machine left the one
    before it valid and forgotten, until the user's cap of tokens ended it."""
    first = json.loads(_config(tmp_path).read_text())["token"]

    again = qm("login", "--username", "alice", "--password-stdin", stdin="alice\n")

    assert again.code == 0, again.err
    second = json.loads(_config(tmp_path).read_text())["token"]
    assert second != first
    assert _me(live_server, first) == 401 and _me(live_server, second) == 200
    assert ApiToken.objects.filter(user__username="alice").count() == 1


def test_a_new_login_as_someone_else_revokes_the_replaced_users_token_too(alice_qm, qm, live_server,
                                                                          tmp_path) -> None:
    alices = json.loads(_config(tmp_path).read_text())["token"]

    assert qm("login", "--username", "bob", "--password-stdin", stdin="bob\n").code == 0

    assert _me(live_server, alices) == 401
    assert json.loads(_config(tmp_path).read_text())["username"] == "bob"
