"""A Retry-After longer than what is left of the node's lease does not make the agent fence its jobs.

A 429, or a 502/503/504 with a usable Retry-After, is waited out (`THROTTLED` in node.py). Until
6 Dec it was waited out in full whatever the lease said: a load balancer answering one heartbeat
"503, Retry-After: 30" while the lease was 20 s made the agent SIGKILL every job at its
self-fence deadline, although the control plane was merely busy and would have taken the next
heartbeat. Now a registered agent asks again before its lease would lapse: at its self-fence
deadline less the same margin (max(1 s, 10 % of the lease)), never sooner than 1 s after the
answer, and says so; only a lease that really lapses without a successful contact fences.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from structlog.testing import capture_logs

from controlplane.agent.client import AgentClient, Throttled
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory
from controlplane.choices import JobState, NodeState
from controlplane.models import Allocation, Job, Node
from controlplane.services import cycle, reconcile
from tests.controlplane.agent.test_node_agent import (
    FakeClock,
    ScriptedControlPlane,
    allocation,
    make_agent,
    run_for,
)
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job

SHORTENED = "asking again before its lease runs out"


class LoadBalancer:
    """A reverse proxy in front of the live control plane: it forwards every request, except that
    once `busy_from` is set, the agent requests it receives for `busy_for_s` after the first one
    are answered 503 with `Retry-After: 30` (its backend pool said "busy"), without reaching the
    control plane. Records (monotonic clock, path, status) of each agent request."""

    def __init__(self, backend: str) -> None:
        self.backend = backend.rstrip("/")
        self.busy_for_s = 0.0
        self.busy_until: float | None = None
        self.armed = False
        self.requests: list[tuple[float, str, int]] = []
        self.lock = threading.Lock()

    def answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        body = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        now = time.monotonic()
        with self.lock:
            if self.armed and self.busy_until is None:
                self.busy_until = now + self.busy_for_s
            busy = self.busy_until is not None and now < self.busy_until
        if busy:
            page = b"<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"
            status, headers = 503, {"Content-Type": "text/html", "Retry-After": "30"}
        else:
            reply = requests.post(self.backend + handler.path, data=body, timeout=30,
                                  headers={k: v for k, v in handler.headers.items()
                                           if k.lower() in ("authorization", "content-type")})
            page, status = reply.content, reply.status_code
            headers = {k: v for k, v in reply.headers.items() if k.lower() in ("content-type", "retry-after")}
        self.requests.append((now, handler.path, status))
        handler.send_response(status)
        for key, value in headers.items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(page)))
        handler.end_headers()
        handler.wfile.write(page)


@pytest.fixture
def balancer(live_server: Any) -> Iterator[tuple[str, LoadBalancer]]:
    state = LoadBalancer(live_server.url)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            state.answer(self)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.django_db(transaction=True)
def test_a_503_asking_for_longer_than_the_lease_is_cut_short_and_the_job_keeps_running(
        balancer: tuple[str, LoadBalancer], settings: Any) -> None:
    """The real control plane (PostgreSQL, its reconcile quarantining a node whose lease lapsed)
    behind a load balancer that answers the agent "503, Retry-After: 30" for a second: with a lease
    of 5 s (self-fence 4 s after the last heartbeat was sent) the agent asks again about 3 s after
    it, is served, and its job runs on; the node never lapses."""
    settings.QM = {**settings.QM, "AGENT_LEASE_S": 5.0}
    url, lb = balancer
    fleet = build_loop_fleet()
    agent = NodeAgent(NodeInventory(name="sim-lb", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64,
                                    memory_gb=512, leaf_switch="leaf-1", spine="spine-1", simulated=True),
                      client=AgentClient(url), launcher=SimulatedLauncher(), bootstrap_token=BOOTSTRAP,
                      sample_interval_s=60.0)

    def run_until(condition: Any, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not condition():
            time.sleep(min(agent.step(), 0.05))
            reconcile.reconcile_nodes()

    run_until(lambda: Node.objects.filter(name="sim-lb", state=NodeState.READY).exists(), 30)
    job = make_job(fleet)  # runs until stopped
    cycle.run_cycle("test")
    run_until(lambda: Allocation.objects.filter(job=job, started_at__isnull=False).exists(), 30)
    assert agent.members and agent.lease_s == 5.0
    lb.busy_for_s, lb.armed = 1.0, True

    with capture_logs() as logs:
        run_until(lambda: False, 9.0)

    refused = [r for r in lb.requests if r[2] == 503]
    assert refused, "the load balancer never answered 503"
    served_before = [r for r in lb.requests if r[2] < 500 and r[0] < refused[0][0]]
    after = [r for r in lb.requests if r[0] > refused[-1][0]]
    # asked again before the lease's self-fence deadline (4 s after the last heartbeat taken was
    # sent), not 30 s later; and not at once either: at least the 1 s floor after the 503
    assert after and after[0][2] == 200, [(round(r[0] - refused[0][0], 2), r[2]) for r in lb.requests]
    assert 1.0 <= after[0][0] - refused[-1][0] and after[0][0] - served_before[-1][0] < 4.0
    assert agent.counters["self_fenced"] == 0 and agent.registered
    assert [running.stop_kind for running in agent.members.values()] == [None]
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    assert Node.objects.get(name="sim-lb").state == NodeState.READY  # the server's lease never lapsed either
    (shortened,) = [e for e in logs if SHORTENED in e["event"]]
    assert shortened["log_level"] == "warning" and shortened["status"] == 503 and shortened["retry_after_s"] == 30
    assert shortened["retry_in_s"] < shortened["lease_left_s"] < 4.0
    assert not [e for e in logs if e["event"].startswith("self-fenced")]


# ---------------------------------------------------------------------- the rule, on a fake clock


class Busy(ScriptedControlPlane):
    """Answers `told` 429s (Retry-After: `retry_after_s`) to every call while the fake clock is
    before `until`; records when each call reached it and what it answered."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.until = 0.0
        self.retry_after_s = 0.0
        self.calls: list[tuple[float, bool]] = []

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        assert self.clock is not None
        throttled = self.clock.now < self.until
        self.calls.append((self.clock.now, throttled))
        if throttled:
            raise Throttled("a proxy's rate limit", self.retry_after_s)
        return super()._reply(body)


def _busy_agent(lease_s: float = 20.0) -> tuple[FakeClock, Busy, NodeAgent]:
    clock = FakeClock()
    plane = Busy(clock)
    plane.allocations = [allocation(5, [0])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)
    assert agent.registered and 5 in agent.members and agent.lease_s == lease_s
    return clock, plane, agent


def test_a_registered_agent_asks_again_at_its_lease_deadline_less_the_margin_not_as_late_as_told() -> None:
    clock, plane, agent = _busy_agent()
    deadline = agent.lease_valid_until  # the last heartbeat taken + 20 s lease - 2 s margin
    plane.until, plane.retry_after_s = clock.now + 5.0, 600.0

    with capture_logs() as logs:
        run_for(agent, clock, 30.0, tick=0.05)

    throttled = [at for at, refused in plane.calls if refused]
    assert len(throttled) == 1
    (retry, _) = next(call for call in plane.calls if call[0] > throttled[0])
    assert deadline - 2.0 - 0.05 <= retry <= deadline - 2.0 + 0.1  # the deadline less the margin (2 s)
    assert agent.counters["self_fenced"] == 0 and agent.members[5].stop_kind is None
    (said,) = [e for e in logs if SHORTENED in e["event"]]
    assert said["log_level"] == "warning" and said["retry_after_s"] == 600.0
    assert said["retry_in_s"] == pytest.approx(deadline - 2.0 - throttled[0], abs=0.01)
    assert said["lease_left_s"] == pytest.approx(deadline - throttled[0], abs=0.1)


def test_a_retry_after_shorter_than_the_lease_is_waited_out_as_told() -> None:
    clock, plane, agent = _busy_agent()
    plane.until, plane.retry_after_s = clock.now + 3.0, 6.0

    with capture_logs() as logs:
        run_for(agent, clock, 12.0, tick=0.05)

    throttled = [at for at, refused in plane.calls if refused]
    later = [at for at, _ in plane.calls if at > throttled[-1]]
    assert len(throttled) == 1 and later[0] - throttled[0] >= 6.0
    assert not [e for e in logs if SHORTENED in e["event"]]


def test_an_idle_node_keeps_its_lease_too_and_once_it_has_lapsed_waits_as_told_instead_of_every_second() -> None:
    """With nothing to fence, a lapsed lease costs the node its place (quarantined until it
    registers again, heavier for the control plane than a heartbeat), so it is kept the same way.
    But once it has lapsed there is nothing left to keep: the Retry-After stands again, and a
    control plane that keeps throttling is not asked every second (the floor) for as long."""
    clock = FakeClock()
    plane = Busy(clock)
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)
    assert agent.registered and not agent.members
    deadline, start = agent.lease_valid_until, clock.now
    plane.until, plane.retry_after_s = clock.now + 1000.0, 90.0

    run_for(agent, clock, 80.0, tick=0.05)

    tried = [at for at, _ in plane.calls if at >= start]
    before = [at for at in tried if at < deadline]
    # the 429, again 2 s before the deadline, once more a second later, once just past it; then 90 s
    assert len(before) == 3 and before[1] == pytest.approx(deadline - 2.0, abs=0.1), (tried, deadline)
    assert len(tried) == 4 and tried[3] < deadline + 1.0, (tried, deadline)
