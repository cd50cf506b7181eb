"""A researcher's first `qm` command, before any `qm login`: no --url, no $QM_URL and no stored
server, so qm tries its default address. When nothing answers there it said only "cannot reach
http://localhost:8000: connection refused (is the server running? check --url or QM_URL)", as
if the fleet's server were down (found walking the demo, 7 Dec). It now says that no server was
named and how to name one: `qm login --url`. A server that was named and does not answer keeps
the old sentence, which is right for it."""

from __future__ import annotations

import io

import pytest

from controlplane.cli import client
from controlplane.cli.main import main

# Port 9 (discard): nothing listens on it here, so a connection is refused at once.
NOBODY = "http://127.0.0.1:9"


@pytest.fixture
def no_login(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("QM_URL", raising=False)
    monkeypatch.delenv("QM_TOKEN", raising=False)
    # The default address, where no server answers on this machine.
    monkeypatch.setattr(client, "DEFAULT_URL", NOBODY)


@pytest.mark.parametrize("argv", [["list"], ["status", "7"], ["submit", "--gpus", "1", "--", "true"],
                                  ["login", "-u", "alice", "--password-stdin"]])
def test_a_command_before_any_login_says_to_log_in_with_a_url(no_login, capsys, monkeypatch, argv) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("alice\n"))  # qm login's password
    code = main(argv)

    err = capsys.readouterr().err
    assert code == 2
    assert f"cannot reach {NOBODY}" in err
    assert "no server was named" in err and "qm login --url" in err
    assert "Traceback" not in err


def test_a_server_named_that_does_not_answer_is_said_to_be_down(no_login, capsys, monkeypatch) -> None:
    monkeypatch.setenv("QM_URL", NOBODY)

    code = main(["list"])

    err = capsys.readouterr().err
    assert code == 2 and f"cannot reach {NOBODY}" in err and "is the server running?" in err
    assert "no server was named" not in err
