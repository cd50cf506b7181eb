"""How long `qm` waits for the server's answer: `--timeout SECONDS` (before or after the command),
else $QM_TIMEOUT, else 30 s; a value that is no number of seconds above 0 (at most an hour) is
refused naming the flag or the variable, before anything is sent. Until 6 Dec it was 30 s, fixed.

Real processes against a real listening socket that takes connections and never answers (a
server hung, a proxy holding the request), and against the live server."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tests.controlplane.cli.conftest import Run


@dataclass
class Silent:
    listener: socket.socket
    url: str

    def connections_waiting(self) -> int:
        """Connections made to it so far (taken, then closed)."""
        self.listener.settimeout(0.2)
        taken = 0
        try:
            while True:
                self.listener.accept()[0].close()
                taken += 1
        except TimeoutError:
            return taken


@pytest.fixture
def silent_server() -> Iterator[Silent]:
    """A listening socket nobody accepts from: the kernel completes each connection, no answer
    ever comes."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield Silent(listener, f"http://127.0.0.1:{listener.getsockname()[1]}")


def test_timeout_flag_bounds_the_wait_for_an_answer(qm: Callable[..., Run], silent_server: Silent) -> None:
    for args in (["--timeout", "0.5", "whoami"], ["whoami", "--timeout=0.5"]):
        began = time.monotonic()
        r = qm(*args, url=silent_server.url)
        took = time.monotonic() - began

        assert r.code == 2, (args, r.err)
        assert r.err == (f"error: {silent_server.url} did not answer within 0.5 s (--timeout SECONDS or "
                         "$QM_TIMEOUT to wait longer)\n"), r.err
        assert took < 10, took


def test_qm_timeout_variable_sets_it_and_the_flag_wins(qm: Callable[..., Run], silent_server: Silent) -> None:
    url = silent_server.url
    by_variable = qm("whoami", url=url, extra_env={"QM_TIMEOUT": "0.7"})
    by_flag = qm("whoami", "--timeout", "0.4", url=url, extra_env={"QM_TIMEOUT": "600"})

    assert by_variable.code == 2 and "did not answer within 0.7 s" in by_variable.err, by_variable.err
    assert by_flag.code == 2 and "did not answer within 0.4 s" in by_flag.err, by_flag.err


def test_a_timeout_that_is_no_number_of_seconds_is_refused_before_any_request(
        qm: Callable[..., Run], silent_server: Silent) -> None:
    url = silent_server.url
    said = "give the seconds qm waits for the server's answer, a number above 0 and at most 3600"
    for value in ("0", "-1", "abc", "nan", "inf", "3601", "1e9", ""):
        r = qm("whoami", "--timeout", value, url=url)
        assert (r.code, r.err) == (2, f"error: --timeout {value}: {said}\n"), (value, r.err)
    for value in ("0", "soon", "nan"):
        r = qm("whoami", url=url, extra_env={"QM_TIMEOUT": value})
        assert (r.code, r.err) == (2, f"error: QM_TIMEOUT={value}: {said}\n"), (value, r.err)

    assert silent_server.connections_waiting() == 0  # none of them asked the server


def test_a_flags_beginning_is_not_taken_for_timeout(qm: Callable[..., Run], silent_server: Silent) -> None:
    # argparse takes an unambiguous beginning for the whole flag: with --timeout on every
    # command, `qm requeue 5 --time 30` (a runtime limit meant; requeue has no --time) would
    # quietly have set a 30-s HTTP timeout where it was refused as an unknown flag before.
    url = silent_server.url
    for args in (["requeue", "5", "--time", "30"], ["--time=30", "list"], ["list", "--timeo", "30"]):
        r = qm(*args, url=url)
        typed = next(a for a in args if a.startswith("--ti")).split("=")[0]
        assert r.code == 2, (args, r.err)
        assert (f"error: {typed} is not taken for --timeout (how long qm waits for the server's answer): give "
                "--timeout SECONDS in full") in r.err, r.err
    assert silent_server.connections_waiting() == 0


def test_qm_works_as_before_with_a_timeout_given(alice_qm: Callable[..., Run]) -> None:
    by_flag = alice_qm("--timeout", "5", "whoami", "--json")
    by_variable = alice_qm("whoami", "--json", extra_env={"QM_TIMEOUT": "2.5"})

    assert by_flag.code == 0 and by_flag.json()["username"] == "alice", by_flag.err
    assert by_variable.code == 0 and by_variable.json()["username"] == "alice", by_variable.err
