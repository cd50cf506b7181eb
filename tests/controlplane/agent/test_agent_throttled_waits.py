"""A 429 tells the agent to slow down, not that its request is wrong.

The control plane answers 429 with Retry-After (and `retry_after` in the body, or in a batch's
item) to an address with too many failed agent authentications (`QM_AGENT_AUTH_FAILURES`,
controlplane/api/agent.py). Until 6 Dec the agent took it as any refusal (`Refused`: "retrying
unchanged will not help"), logged "control plane refused the request" and asked again 5 s later
whatever the Retry-After said; its wake-up poll backed off from half a second. Now it is
`Throttled`: nothing goes to the control plane, not even an exit's report, until the wait is
over (the Retry-After, in seconds or as an HTTP-date, kept within 1 s..1 h and lengthened by up
to a fifth; said nothing: 1, 2, 4 … s up to a minute), its runs go on meanwhile (the lease
decides, as when the control plane cannot be reached), and it logs one warning saying so and how
long it waits.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.signals import request_started
from django.test import RequestFactory
from structlog.testing import capture_logs

from controlplane.agent.client import AgentClient, Refused, Retired, Throttled, error_for, retry_after_s
from controlplane.agent.main import _send_batch
from controlplane.agent.node import (
    THROTTLED,
    THROTTLED_RETRY_MAX_S,
    THROTTLED_TOLD_MAX_S,
    NodeAgent,
    WakeListener,
)
from controlplane.api import throttling
from controlplane.models import Node
from tests.controlplane.agent.real_agent import start_agent, stop_agent, wait_for
from tests.controlplane.agent.test_node_agent import (
    LEASE_S,
    FakeClock,
    ScriptedControlPlane,
    allocation,
    make_agent,
    run_for,
)
from tests.controlplane.loop_fixtures import build_loop_fleet

THROTTLED_LINE = "throttled: the control plane asks this agent to slow down"

# ---------------------------------------------------------------------- a real agent, a real server


@pytest.fixture
def agent_requests() -> Iterator[list[dict[str, Any]]]:
    """Every agent request reaching the live server (it runs in this process): its path, the
    address it came from, and when (this machine's monotonic clock)."""
    seen: list[dict[str, Any]] = []

    def record(sender: Any, environ: dict[str, Any], **kwargs: Any) -> None:
        if environ.get("PATH_INFO", "").startswith("/api/v1/agent/"):
            seen.append({"path": environ["PATH_INFO"], "address": environ.get("REMOTE_ADDR"), "at": time.monotonic()})

    request_started.connect(record, weak=False)
    try:
        yield seen
    finally:
        request_started.disconnect(record)


def _json_lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            continue
    return lines


@pytest.mark.django_db(transaction=True)
def test_agent_waits_as_long_as_a_429_retry_after_says(live_server: Any, tmp_path: Path, state_dir: Path,
                                                       settings: Any, agent_requests: list[dict[str, Any]]) -> None:
    """A real `qm-agent` whose stored token the control plane does not know, behind an address where
    another agent sent a wrong token 54 s ago, with QM_AGENT_AUTH_FAILURES at 2 a minute: its
    token is one failure more, so the bootstrap secret it falls back to is answered 429 with a
    Retry-After of about 6 s. It asks nothing more before that, says so once, and registers
    when the window has passed. (The earlier failure is written as the agent's first request
    arrives, so the Retry-After is the same however long the agent took to start.)"""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "agent_auth": "2/minute"}}
    build_loop_fleet()
    # `state_dir`, not tmp_path (0700): run as root, the agent runs jobs as their submitters by
    # default, and refuses to start where they could not reach their directory.
    (state_dir / "gpu-thr").mkdir(parents=True)
    (state_dir / "gpu-thr" / "token").write_text("qma_unknown-to-this-control-plane\n")

    def another_agents_failure(sender: Any, environ: dict[str, Any], **kwargs: Any) -> None:
        if not earlier:
            earlier.append(time.time() - 54)
            throttling.agent_auth_failed(RequestFactory().post("/api/v1/agent/register", REMOTE_ADDR=environ["REMOTE_ADDR"]),
                                         now=earlier[0])

    earlier: list[float] = []
    request_started.connect(another_agents_failure, weak=False)
    log_path = tmp_path / "agent.log"
    with open(log_path, "wb") as log:
        agent = start_agent(live_server.url, state_dir, "gpu-thr", log,
                            options=("--no-wake", "--log-format", "json"))
        try:
            wait_for(lambda: any(e.get("event") == "registered" for e in _json_lines(log_path)), 60,
                     "the agent to register once the throttle's window passed")
            assert agent.poll() is None
        finally:
            request_started.disconnect(another_agents_failure)
            stop_agent(agent)

    registers = [r for r in agent_requests if r["path"] == "/api/v1/agent/register"]
    assert {r["address"] for r in registers} == {"127.0.0.1"}
    # The stored token (401, the failure that trips the throttle), the bootstrap secret (429),
    # then nothing until the Retry-After has passed: the registration that is taken. (Before:
    # the 429 again 5 s later, whatever the Retry-After said, and then the registration.)
    assert len(registers) == 3, [round(r["at"] - registers[0]["at"], 2) for r in registers]
    said = _json_lines(log_path)
    (throttled,) = [e for e in said if str(e.get("event", "")).startswith(THROTTLED_LINE)]
    assert throttled["level"] == "warning" and throttled["call"] == "register"
    told = throttled["retry_after_s"]
    # The window's end: 6 s after the agent's first request, less the time it took to ask again
    # (measured, not assumed: on a loaded machine the agent's second request can come seconds
    # after its first, and a fixed "at least 4 s" would then fail a Retry-After that is right).
    window_end = 6 - (registers[1]["at"] - registers[0]["at"])
    assert told == pytest.approx(max(1.0, window_end), abs=1.5), (told, window_end)
    assert throttled["retry_in_s"] >= told
    assert "Too many failed agent authentications" in throttled["detail"]
    assert not [e for e in said if e.get("event") == "control plane refused the request"]
    assert any(str(e.get("event", "")).startswith("no longer throttled") for e in said)

    assert registers[2]["at"] - registers[1]["at"] >= told
    assert Node.objects.get(name="gpu-thr").agent_token_hash


# ---------------------------------------------------------------------- what the client reads


@pytest.mark.parametrize(("header", "seconds"), [
    ("6", 6.0), (" 120 ", 120.0), ("0", 0.0), ("2.5", 2.5),  # seconds, as the control plane writes them
    (7, 7.0), (1.5, 1.5),  # a body's `retry_after` (JSON)
    ("Sun, 06 Dec 2026 08:00:30 GMT", 30.0),  # an HTTP-date (RFC 9110's preferred form)
    ("Sunday, 06-Dec-26 08:01:00 GMT", 60.0), ("Sun Dec  6 08:00:10 2026", 10.0),  # its obsolete forms
    ("Sun, 06 Dec 2026 07:59:00 GMT", 0.0),  # a date already past: at once (the agent's bounds apply)
    ("-5", None), (-1, None), ("soon", None), ("", None), ("5 s", None), ("nan", None), ("inf", None),
    ("1e999", None), (10**400, None), (True, None), (None, None), ("Sun, 99 Dec 2026 08:00:00 GMT", None),
])
def test_a_retry_after_is_read_in_seconds_or_as_an_http_date_and_anything_else_is_ignored(
        header: Any, seconds: float | None) -> None:
    now = 1796544000.0  # Sun, 06 Dec 2026 08:00:00 GMT
    assert retry_after_s(header, now=now) == (None if seconds is None else pytest.approx(seconds))


def test_a_429_is_throttled_not_refused_with_the_wait_from_the_body_the_header_or_none() -> None:
    body = {"detail": "Too many failed agent authentications from this address; try again in 41 s", "code": "throttled"}

    from_body = error_for(429, {**body, "retry_after": 41}, "600")
    from_header = error_for(429, body, "41")
    nothing = error_for(429, body, "whenever")
    batch_item = error_for(429, {"node": "sim-001", "status": 429, "detail": body["detail"], "retry_after": 41})

    for error in (from_body, from_header, nothing, batch_item):
        assert isinstance(error, Throttled) and not isinstance(error, Refused)
        assert error.detail == body["detail"]
    assert from_body.retry_after_s == from_header.retry_after_s == batch_item.retry_after_s == 41  # type: ignore[attr-defined]
    assert nothing.retry_after_s is None  # type: ignore[attr-defined]
    # the other 4xx answers are what they were
    assert isinstance(error_for(409, {"code": "node_retired", "detail": "retired"}, "60"), Retired)
    assert type(error_for(400, {"detail": "bad"}, "60")) is Refused


class _ProxyRateLimit(http.server.BaseHTTPRequestHandler):
    """A proxy in front of the control plane that rate-limits: 429 with an HTML page."""

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        page = b"<html><body><h1>429 Too Many Requests</h1></body></html>"
        self.send_response(429)
        self.send_header("Content-Type", "text/html")
        self.send_header("Retry-After", "7")
        self.send_header("Content-Length", str(len(page)))
        self.end_headers()
        self.wfile.write(page)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        pass


def test_a_proxys_429_with_a_page_that_is_not_json_is_throttled_too() -> None:
    """Until 6 Dec a body that is not JSON made any answer `Unreachable`, and its Retry-After was lost."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ProxyRateLimit)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(Throttled) as throttled:
            AgentClient(f"http://127.0.0.1:{server.server_address[1]}").heartbeat("gpu-01", "qma_x", {"running": []})
    finally:
        server.shutdown()
        server.server_close()
    assert throttled.value.retry_after_s == 7


# ---------------------------------------------------------------------- how long the agent waits


def test_a_throttled_agent_waits_at_least_what_it_is_told_within_1_s_and_1_h_lengthened_by_up_to_a_fifth() -> None:
    least, most = (lambda: 0.0), (lambda: 1.0)
    assert THROTTLED.wait_s(6, 1, least) == 6 and THROTTLED.wait_s(6, 1, most) == pytest.approx(7.2)
    assert THROTTLED.wait_s(41, 9, least) == 41  # told: the count of refusals does not matter
    assert THROTTLED.wait_s(0, 1, least) == 1  # "at once" does not make it spin
    assert THROTTLED.wait_s(10**9, 1, least) == THROTTLED_TOLD_MAX_S == 3600  # "in 30 years" does not silence it
    assert THROTTLED.wait_s(10**9, 1, most) <= 1.2 * THROTTLED_TOLD_MAX_S
    # said nothing: 1, 2, 4 … s up to a minute, each lengthened by up to a fifth
    assert [THROTTLED.wait_s(None, n, least) for n in range(1, 9)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert THROTTLED.wait_s(None, 10_000, most) == pytest.approx(1.2 * THROTTLED_RETRY_MAX_S)
    drawn = [THROTTLED.wait_s(10, 1) for _ in range(200)]
    assert min(drawn) >= 10 and max(drawn) <= 12 and len(set(drawn)) > 1  # spread, never shorter


# ---------------------------------------------------------------------- the agent's rounds


class ThrottlingControlPlane(ScriptedControlPlane):
    """A scripted control plane that answers 429 to every call until `until` (the fake clock),
    with `told` as its Retry-After; records when each call reached it."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.until = 0.0
        self.told: float | None = None
        self.calls: list[float] = []

    def _throttle(self) -> None:
        assert self.clock is not None
        self.calls.append(self.clock.now)
        if self.clock.now < self.until:
            raise Throttled("Too many failed agent authentications from this address", self.told)

    def register(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        self._throttle()
        return super().register(token, body)

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        self._throttle()
        return super()._reply(body)


def _throttled_from_now(plane: ThrottlingControlPlane, clock: FakeClock, seconds: float, told: float | None) -> float:
    plane.until, plane.told = clock.now + seconds, told
    return clock.now


def test_a_throttled_agent_keeps_its_runs_and_sends_nothing_before_the_wait_is_over_not_even_an_exit() -> None:
    clock = FakeClock()
    plane = ThrottlingControlPlane(clock)
    plane.allocations = [allocation(5, [0]), allocation(6, [1], env={"QM_SIM_DURATION_S": "4"})]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)
    assert set(agent.members) == {5, 6}
    start = _throttled_from_now(plane, clock, 8.0, told=8.0)
    before = len(plane.calls)

    with capture_logs() as logs:
        run_for(agent, clock, 12.0)

    throttled_at = plane.calls[before]  # its next heartbeat, within an interval
    after = plane.calls[before + 1:]
    assert throttled_at < start + 2.5
    assert after and after[0] - throttled_at >= 8.0, plane.calls  # the exit of 6 at ~+4 s waited too
    assert 5 in agent.members and agent.members[5].stop_kind is None  # its run goes on: the lease decides
    assert agent.registered and agent.counters["self_fenced"] == 0
    (exited,) = plane.reports("exited")  # delivered once the wait was over, exactly once
    assert exited["generation"] == 6
    (warned,) = [e for e in logs if e["event"].startswith(THROTTLED_LINE)]
    assert warned["log_level"] == "warning" and warned["call"] == "heartbeat"
    assert warned["retry_after_s"] == 8.0 and 8.0 <= warned["retry_in_s"] <= 9.6 and warned["attempt"] == 1
    assert "asking again as it says, in " in warned["event"]
    assert not [e for e in logs if e["event"] == "control plane refused the request"]
    (back,) = [e for e in logs if e["event"].startswith("no longer throttled")]
    assert back["attempts"] == 1 and back["throttled_for_s"] >= 8.0


def test_a_throttle_longer_than_the_lease_ends_in_the_self_fence_as_an_unreachable_control_plane_does() -> None:
    """Told to wait 90 s with a 20 s lease, the agent comes back before its lease would lapse
    (test_agent_keeps_its_lease_through_a_long_retry_after.py); a control plane that still
    refuses until the lease has lapsed gets the self-fence. Until 6 Dec the agent came back
    only after the whole 90 s: one call, the 429, then the fence."""
    clock = FakeClock()
    plane = ThrottlingControlPlane(clock)
    plane.allocations = [allocation(5, [0])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)
    deadline = agent.lease_valid_until
    start = _throttled_from_now(plane, clock, 120.0, told=90.0)

    run_for(agent, clock, LEASE_S + 5)

    assert agent.counters["self_fenced"] == 1 and not agent.members
    tried = [at for at in plane.calls if start <= at < deadline]
    # the 429, again 2 s before the deadline, and once more a second later; all refused
    assert len(tried) == 3 and tried[1] == pytest.approx(deadline - 2.0, abs=0.3), (tried, deadline)


def test_a_429_without_retry_after_backs_off_from_1_s_doubling_and_never_spins() -> None:
    clock = FakeClock()
    plane = ThrottlingControlPlane(clock)
    agent = make_agent(plane, clock)
    _throttled_from_now(plane, clock, 1000.0, told=None)

    run_for(agent, clock, 30.0, tick=0.05)

    gaps = [b - a for a, b in zip(plane.calls, plane.calls[1:], strict=False)]
    assert 3 <= len(plane.calls) <= 5, plane.calls  # 0, ≥1, ≥3, ≥7, ≥15 s: not 600 rounds' worth
    assert all(gap >= 2 ** i for i, gap in enumerate(gaps)), gaps
    assert not agent.registered


def test_a_simulated_nodes_batch_item_answered_429_waits_as_its_retry_after_says() -> None:
    """`qm-agent --simulate` sends many nodes' heartbeats in one request; an item over the
    address's limit is answered 429 with `retry_after` in the item."""
    clock = FakeClock()
    plane = ThrottlingControlPlane(clock)
    plane.allocations = [allocation(5, [0])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)
    agent.urgent = True
    call = agent.begin()
    assert call is not None and call.kind == "heartbeat"

    class Batch:
        def sync_many(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [{"node": i["name"], "status": 429, "retry_after": 15,
                     "detail": "Too many failed agent authentications from this address; try again in 15 s"}
                    for i in items]

    _send_batch(Batch(), [(agent, call)])  # type: ignore[arg-type]
    agent.end()
    told_at, before = clock.now, len(plane.calls)
    run_for(agent, clock, 14.0)

    assert len(plane.calls) == before and 5 in agent.members and agent.registered
    run_for(agent, clock, 6.0)
    assert plane.calls[before] - told_at >= 15.0


# ---------------------------------------------------------------------- the wake-up poll


def test_the_wake_up_poll_asks_again_no_sooner_than_a_429_says() -> None:
    """Before, a 429 on `nodes/wait` was backed off as any failure: again after 0.5 s, 1 s, 2 s."""
    clock = FakeClock()
    agent: NodeAgent = make_agent(ScriptedControlPlane(clock), clock)
    run_for(agent, clock, 1.0)
    assert agent.registered

    class Waits:
        calls = 0

        def wait(self, items: list[dict[str, Any]], since: int | None, timeout_s: float,
                 desired: bool = False) -> dict[str, Any]:
            Waits.calls += 1
            raise Throttled("Too many failed agent authentications from this address", 5.0)

    stop = threading.Event()
    listener = WakeListener([agent], Waits(), lambda woken: None, stop, timeout_s=1.0)  # type: ignore[arg-type]
    listener.start()
    try:
        time.sleep(2.0)
    finally:
        stop.set()
        listener.join(timeout=10)
    assert Waits.calls == 1
