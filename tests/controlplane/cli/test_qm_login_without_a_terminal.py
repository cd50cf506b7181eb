"""`qm login` in a script or CI, where standard input has ended: without `--username` it asked
for one with `input()` and died with an EOFError traceback; `--password-stdin` without
`--username` read the password line as the user name and then sent an empty password ("password:
This field may not be blank."). Each now says what to give, exits 1 and stores nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.slow


def _config(tmp_path: Path) -> Path:
    return tmp_path / "config" / "quartermaster" / "config.json"


def test_no_username_and_standard_input_ended_says_to_give_username(qm, fleet, tmp_path) -> None:
    r = qm("login", stdin="")

    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert "error: no username: standard input ended before one was typed; give it with --username" in r.err
    assert not _config(tmp_path).exists()


def test_password_stdin_without_username_is_refused_before_reading_the_password(qm, fleet, tmp_path) -> None:
    r = qm("login", "--password-stdin", stdin="alice\n")

    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert r.err.startswith("error: --password-stdin reads the password from standard input: give the user "
                            "name with --username"), r.err
    assert not _config(tmp_path).exists()


def test_password_stdin_with_nothing_on_it_says_so(qm, fleet, tmp_path) -> None:
    r = qm("login", "-u", "alice", "--password-stdin", stdin="")

    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert "error: --password-stdin: standard input gave no password" in r.err
    assert not _config(tmp_path).exists()
    assert qm("login", "-u", "alice", "--password-stdin", stdin="alice\r\n").code == 0  # a file saved on Windows
