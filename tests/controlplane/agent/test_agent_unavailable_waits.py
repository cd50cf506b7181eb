"""A 503 (or 502/504) that says when to come back is waited out, as a 429 is.

A control plane whose database is restarting answers 503 `database_unavailable` with
Retry-After: 1 (controlplane/api/agent.py), and a load balancer in maintenance or with no healthy
backend a 503 page with a Retry-After of its own. Until 6 Dec the agent took any 5xx as
`Unreachable` and asked again within a second whatever the header said. Now a 502/503/504 with a
usable Retry-After is `Throttled` (client.py): nothing goes to the control plane before the wait
(the Retry-After, kept within 1 s..1 h and lengthened by up to a fifth: `THROTTLED` in node.py),
the runs go on meanwhile (the lease decides); one without stays `Unreachable`.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from structlog.testing import capture_logs

from controlplane.agent.client import AgentClient, Throttled, Unreachable
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory
from tests.controlplane.agent.test_node_agent import allocation

LEASE_S = 30.0


class Unavailable:
    """What the fake control plane answers meanwhile: `status` with `retry_after` (None: no header)."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.retry_after: str | None = None
        self.requests: list[tuple[float, str, int]] = []  # (monotonic clock, path, status answered)


def _handler(state: Unavailable) -> type[http.server.BaseHTTPRequestHandler]:
    class ControlPlane(http.server.BaseHTTPRequestHandler):
        """The agent endpoints, as far as one node needs them; or a load balancer's 5xx page."""

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            status = state.status
            state.requests.append((time.monotonic(), self.path, status or 200))
            if status is not None:
                page = b"<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"
                self.send_response(status)
                self.send_header("Content-Type", "text/html")
                if state.retry_after is not None:
                    self.send_header("Retry-After", state.retry_after)
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
                return
            if self.path.endswith("/register"):
                reply: dict[str, Any] = {"node": "n1", "token": "qma_n1", "node_state": "ready", "lease_s": LEASE_S,
                                         "heartbeat_interval_s": 0.2}
                code = 201
            else:
                reply = {"node": "n1", "node_state": "ready", "lease_s": LEASE_S, "heartbeat_interval_s": 0.2,
                         "reregister": False, "allocations": [allocation(5, [0])], "stop": []}
                code = 200
            body = json.dumps(reply).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            pass

    return ControlPlane


@pytest.fixture
def plane() -> Iterator[tuple[str, Unavailable]]:
    state = Unavailable()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def _agent(url: str) -> NodeAgent:
    return NodeAgent(NodeInventory(name="n1", gpu_count=2), client=AgentClient(url), launcher=SimulatedLauncher(),
                     bootstrap_token="bootstrap", interval_s=0.2, sample_interval_s=60.0)


def _run(agent: NodeAgent, seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        time.sleep(min(agent.step(), 0.05, max(0.0, until - time.monotonic())))


def test_a_503_with_retry_after_is_waited_out_before_anything_more_is_sent_and_the_runs_go_on(
        plane: tuple[str, Unavailable]) -> None:
    url, state = plane
    agent = _agent(url)
    _run(agent, 1.0)
    assert agent.registered and 5 in agent.members
    state.status, state.retry_after = 503, "3"

    with capture_logs() as logs:
        _run(agent, 2.0)
        refused = [r for r in state.requests if r[2] == 503]
        # One heartbeat answered 503, then nothing: before, one every second (`Unreachable`).
        assert len(refused) == 1, [round(r[0] - refused[0][0], 2) for r in refused]
        state.status = None
        _run(agent, 2.5)

    after = [r for r in state.requests if r[0] > refused[0][0]]
    assert after and after[0][0] - refused[0][0] >= 3.0, [round(r[0] - refused[0][0], 2) for r in after]
    assert 5 in agent.members and agent.members[5].stop_kind is None  # its run went on: the lease decides
    assert agent.registered and agent.counters["self_fenced"] == 0
    (warned,) = [e for e in logs if e["event"].startswith("throttled: the control plane cannot serve this agent now")]
    assert warned["log_level"] == "warning" and warned["status"] == 503 and warned["retry_after_s"] == 3.0
    assert 3.0 <= warned["retry_in_s"] <= 3.6 and "503" in warned["event"]
    assert not [e for e in logs if e["event"] == "control plane unreachable"]
    assert [e for e in logs if e["event"].startswith("no longer throttled")]


def test_a_503_without_retry_after_is_still_unreachable_and_asked_again_soon(plane: tuple[str, Unavailable]) -> None:
    url, state = plane
    agent = _agent(url)
    _run(agent, 1.0)
    state.status, state.retry_after = 503, None

    with capture_logs() as logs:
        _run(agent, 2.0)

    refused = [r for r in state.requests if r[2] == 503]
    assert len(refused) >= 3  # asked again within the heartbeat interval (or a second), as before
    assert [e for e in logs if e["event"] == "control plane unreachable"]
    assert not [e for e in logs if e["event"].startswith("throttled")]


@pytest.mark.parametrize(("status", "header", "expected"), [
    (503, "3", Throttled), (502, "3", Throttled), (504, "Sun, 06 Dec 2026 08:00:30 GMT", Throttled),
    (503, None, Unreachable), (503, "soon", Unreachable), (503, "-1", Unreachable),
    (500, "3", Unreachable), (501, "3", Unreachable),  # a server error that is not "not now"
])
def test_only_a_502_503_or_504_with_a_usable_retry_after_is_throttled(
        plane: tuple[str, Unavailable], status: int, header: str | None, expected: type[Exception]) -> None:
    url, state = plane
    state.status, state.retry_after = status, header
    with pytest.raises(expected) as raised:
        AgentClient(url).heartbeat("n1", "qma_n1", {"running": []})
    if isinstance(raised.value, Throttled):
        assert raised.value.status == status and raised.value.retry_after_s is not None
        assert f"HTTP {status}" in str(raised.value)


def test_the_control_planes_own_503_says_why_and_when() -> None:
    """controlplane/api/agent.py answers a database that cannot be reached 503 with a JSON body and
    Retry-After: 1; its words are what the agent logs."""
    body = json.dumps({"detail": "The database is unavailable; resend the request shortly.",
                       "code": "database_unavailable"}).encode()

    class Database(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(503)
            self.send_header("Content-Type", "application/json")
            self.send_header("Retry-After", "1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Database)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(Throttled) as raised:
            AgentClient(f"http://127.0.0.1:{server.server_address[1]}").report("n1", "qma_n1", {"running": []})
    finally:
        server.shutdown()
        server.server_close()
    assert raised.value.retry_after_s == 1.0 and raised.value.status == 503
    assert raised.value.detail == "nodes/n1/report: The database is unavailable; resend the request shortly."


def test_the_wake_up_poll_waits_out_a_503s_retry_after_too(plane: tuple[str, Unavailable]) -> None:
    """`nodes/wait` is answered 503 with Retry-After when Redis is down or the web process holds all
    the waits it may (controlplane/api/agent.py). Before, the poll asked again after 0.5 s, 1 s, 2 s."""
    from controlplane.agent.node import WakeListener

    url, state = plane
    agent = _agent(url)
    _run(agent, 1.0)
    assert agent.registered
    state.status, state.retry_after = 503, "5"
    stop = threading.Event()
    listener = WakeListener([agent], AgentClient(url), lambda woken: None, stop, timeout_s=1.0)
    listener.start()
    try:
        time.sleep(2.5)
    finally:
        stop.set()
        listener.join(timeout=10)
    assert [path for _, path, _ in state.requests if path.endswith("/nodes/wait")] == ["/api/v1/agent/nodes/wait"]
