"""Who else is connected to the test database, and a check that nobody is once a test is over.

A test with a live server (pytest-django's, threads of this process), a real agent, a server
or a worker of its own must leave no session on the test database behind it: one still open
when pytest-django drops the database at the end of the run makes the drop fail, and the run
ends with "database … is being accessed by other users" as a warning, naming no test. Checked
after each such test instead (`no_session_left_on_the_test_database`, autouse in the agent and
`qm` tests' folders), the leak fails the test that left it.

Every connection this process opens says which thread opened it (`application_name`
"pytest <thread>", set when it is made), so the failure tells a live-server request thread
from a test's own thread; a session with no such name is another process's (a server, a worker,
`qm-agent`, `psql`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.db.backends.signals import connection_created

from controlplane.services import agent_wakeups

#: Backends that are closing (a client that has just hung up, a server worker on its way out)
#: leave pg_stat_activity a moment later: this long at most before a leftover counts as a leak.
CLOSING_GRACE_S = 10.0

#: What the application_name of this process's connections starts with.
THIS_PROCESS = "pytest "


def _name_the_thread(sender: Any, connection: Any, **kwargs: Any) -> None:
    """Set the new connection's application_name to the thread that opened it. On the driver's
    own connection, so no test counting its queries sees it."""
    if connection.vendor != "postgresql":
        return
    name = f"{THIS_PROCESS}{threading.current_thread().name}"[:63]  # PostgreSQL's NAMEDATALEN - 1
    connection.connection.execute("SELECT set_config('application_name', %s, false)", [name])


connection_created.connect(_name_the_thread, dispatch_uid="tests.database_sessions.name_the_thread")


def other_sessions() -> list[dict[str, Any]]:
    """The client sessions on this connection's database other than its own (autovacuum and
    PostgreSQL's other background processes left out)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid, application_name, client_addr, client_port, backend_start, state, left(query, 300) "
            "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND backend_type = 'client backend' ORDER BY backend_start"
        )
        columns = ["pid", "application_name", "client_addr", "client_port", "backend_start", "state", "query"]
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]


def describe(session: dict[str, Any]) -> str:
    name = session["application_name"]
    who = (f"thread {name[len(THIS_PROCESS):]!r} of this pytest process" if name.startswith(THIS_PROCESS)
           else f"application_name {name!r}" if name else "another process (no application_name)")
    return (f"pid {session['pid']}: {who}, from {session['client_addr']}:{session['client_port']} since "
            f"{session['backend_start']:%H:%M:%S.%f}, {session['state']}, last query: {session['query']!r}")


def no_session_left_behind(grace_s: float = CLOSING_GRACE_S, before_each_look: Callable[[], object] = lambda: None) -> None:
    """An AssertionError naming each session still on the test database `grace_s` seconds from
    now (one that goes meanwhile was closing, and is no leak). `before_each_look` is called
    before each look at pg_stat_activity (to end what may still be ending)."""
    deadline = time.monotonic() + grace_s
    while True:
        before_each_look()
        left = other_sessions()
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    assert not left, (
        f"{len(left)} session(s) still connected to the test database {grace_s:.0f} s after the test: a thread that "
        "opened a Django connection and never closed it, a server or process not stopped, or a live-server request "
        "thread still serving a client that never hung up; pytest-django could not drop the database with it open\n"
        + "\n".join(describe(session) for session in left)
    )


@pytest.fixture(autouse=True)
def no_session_left_on_the_test_database(request: pytest.FixtureRequest, django_db_blocker: Any) -> Iterator[None]:
    """After each test that used the database: no other session on it. Autouse where a
    conftest imports it (the agent and `qm` tests: live servers, real agents, threads of their
    own). Checked once the test's own fixtures (its agents, its servers) are torn down: this
    fixture is set up before them.

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
    agent_wakeups.answer_every_wait()
