"""A retired node's agent is told how long to wait, backs off, and says so once.

Before, the agent of a retired node asked again every 60 s, forever, with a log line each time.
Now the control plane's 409 `node_retired` carries `Retry-After` (and `retry_after` in the body,
or in the batch item): as long as the node has been retired, at least 60 s, at most 15 min
(services/nodes.retired_retry_after_s). The agent waits that long (kept within 30 s..15 min; a
control plane that says nothing gets a doubling wait from 60 s to 15 min), logs one error line
when the refusals start and nothing more per attempt, and once an admin returns the node it
registers again at its next attempt: within 15 min of the return, with one line saying so.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from structlog.testing import capture_logs

from controlplane.agent.client import AgentClient, Retired, error_for
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import (
    RETIRED,
    RETIRED_RETRY_MAX_S,
    RETIRED_TOLD_MAX_S,
    NodeAgent,
    NodeInventory,
)
from controlplane.choices import NodeState
from controlplane.models import Node
from controlplane.services import nodes
from tests.controlplane import factories as f
from tests.controlplane.agent.test_node_agent import FakeClock
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    agent_client,
    build_loop_fleet,
    register_node,
)

REGISTER = "/api/v1/agent/register"
BODY = {"name": "gpu-01", "pool": "h100", "gpu_type": "H100-80GB", "gpu_count": 8, "cpus": 96, "memory_gb": 1024,
        "leaf_switch": "leaf-1", "spine": "spine-1"}
RETIRED_LINE = "node retired: the control plane refuses this agent until an admin returns the node to service"


def _retired(ago: timedelta = timedelta(0)) -> tuple[Node, str]:
    node, token = register_node("gpu-01")
    nodes.retire(node, f.make_user("root", role="admin"))
    Node.objects.filter(pk=node.pk).update(retired_at=timezone.now() - ago)
    return Node.objects.get(pk=node.pk), token


# ---------------------------------------------------------------------- what the server says


@pytest.mark.parametrize(("ago", "wait"), [(timedelta(0), 60), (timedelta(seconds=30), 60),
                                           (timedelta(minutes=5), 300), (timedelta(hours=2), 900)])
def test_the_refusal_says_to_wait_as_long_as_the_node_has_been_retired_from_1_to_15_min(
        fleet: LoopFleet, ago: timedelta, wait: int) -> None:
    _, token = _retired(ago)

    heartbeat = agent_client(token).post("/api/v1/agent/nodes/gpu-01/heartbeat", {"running": []}, format="json")
    registration = agent_client(BOOTSTRAP).post(REGISTER, BODY, format="json")

    for response in (heartbeat, registration):
        assert response.status_code == 409 and response.json()["code"] == "node_retired"
        assert abs(int(response["Retry-After"]) - wait) <= 1, response["Retry-After"]
        assert abs(response.json()["retry_after"] - wait) <= 1
        assert response.json()["detail"].startswith("node gpu-01 is retired since ")


@pytest.mark.parametrize(("ago", "wait"), [(timedelta(0), 10), (timedelta(seconds=30), 30),
                                           (timedelta(minutes=5), 120)])
def test_the_operator_sets_the_bounds_of_a_retired_agents_wait(fleet: LoopFleet, settings: Any, ago: timedelta,
                                                               wait: int) -> None:
    settings.QM = {**settings.QM, "RETIRED_RETRY_AFTER_MIN_S": 10, "RETIRED_RETRY_AFTER_MAX_S": 120}
    _, token = _retired(ago)

    response = agent_client(token).post("/api/v1/agent/nodes/gpu-01/heartbeat", {"running": []}, format="json")

    assert response.status_code == 409 and abs(int(response["Retry-After"]) - wait) <= 1


def test_a_maximum_below_the_minimum_is_read_as_the_minimum(fleet: LoopFleet, settings: Any) -> None:
    settings.QM = {**settings.QM, "RETIRED_RETRY_AFTER_MIN_S": 300, "RETIRED_RETRY_AFTER_MAX_S": 60}
    node, _ = _retired(timedelta(hours=2))

    assert nodes.retired_retry_after_s(node) == 300


def test_a_batch_item_of_a_retired_node_carries_its_retry_after(fleet: LoopFleet) -> None:
    _, token = _retired(timedelta(hours=1))
    _, other = register_node("gpu-02")

    response = agent_client("-").post("/api/v1/agent/nodes/heartbeats", {"nodes": [
        {"name": "gpu-01", "token": token, "running": []}, {"name": "gpu-02", "token": other, "running": []},
    ]}, format="json")

    retired, alive = response.json()["results"]
    assert retired["status"] == 409 and retired["code"] == "node_retired" and retired["retry_after"] == 900
    assert alive["status"] == 200 and "retry_after" not in alive
    assert isinstance(error := error_for(409, retired), Retired) and error.retry_after_s == 900


def test_the_client_reads_the_wait_from_the_body_or_the_header() -> None:
    body = {"code": "node_retired", "detail": "node x is retired"}

    told = error_for(409, {**body, "retry_after": 120}, "600")
    by_header = error_for(409, body, "600")
    by_date = error_for(409, body, "Sun, 06 Dec 2099 07:28:00 GMT")  # RFC 9110 allows a date (read since 6 Dec)
    nothing = error_for(409, body, "in a while")

    assert isinstance(told, Retired) and told.retry_after_s == 120
    assert isinstance(by_header, Retired) and by_header.retry_after_s == 600
    assert isinstance(by_date, Retired) and by_date.retry_after_s is not None and by_date.retry_after_s > 86_400
    assert isinstance(nothing, Retired) and nothing.retry_after_s is None


def test_the_agent_waits_what_it_is_told_within_bounds_or_doubles_up_to_15_min() -> None:
    assert RETIRED.wait_s(60, 1) == 60 and RETIRED.wait_s(300, 7) == 300
    assert RETIRED.wait_s(1, 1) == 30  # a control plane that says "at once" does not make it spin
    assert RETIRED.wait_s(1800, 1) == 1800  # an operator's longer bound (QM_RETIRED_RETRY_AFTER_MAX_S) is kept
    assert RETIRED.wait_s(86_400, 1) == RETIRED_TOLD_MAX_S == 3600  # one that says "tomorrow" does not lose it
    assert [RETIRED.wait_s(None, n) for n in range(1, 8)] == [60, 120, 240, 480, 900, 900, 900]
    assert RETIRED.wait_s(None, 10_000) == 900


# ------------------------------------------------------------------ the agent, end to end


class CountingClient(AgentClient):
    def __init__(self, server: str) -> None:
        super().__init__(server)
        self.calls: list[str] = []

    def register(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("register")
        return super().register(token, body)

    def heartbeat(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("heartbeat")
        return super().heartbeat(node, token, body)

    def report(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append("report")
        return super().report(node, token, body)


def run_until(agent: NodeAgent, clock: FakeClock, seconds: float, tick: float = 5.0) -> None:
    """The agent's loop over `seconds` of its own (fake) clock, against the real server."""
    end = clock.now + seconds
    while clock.now < end:
        agent.step()
        clock.now += tick


@pytest.mark.django_db(transaction=True)
def test_the_agent_of_a_node_retired_for_hours_asks_every_15_min_logs_once_and_is_back_within_15_min_of_a_return(
        live_server: Any) -> None:
    build_loop_fleet()
    clock = FakeClock()
    client = CountingClient(live_server.url)
    agent = NodeAgent(NodeInventory(name="sim-000", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64,
                                    memory_gb=512, leaf_switch="leaf-1", spine="spine-1", simulated=True),
                      client=client, launcher=SimulatedLauncher(clock=clock, wall=clock.wall),
                      bootstrap_token=BOOTSTRAP, interval_s=2.0, sample_interval_s=5.0, clock=clock, wall=clock.wall)
    run_until(agent, clock, 1.0, tick=0.25)
    assert agent.registered
    node = Node.objects.get(name="sim-000")
    nodes.retire(node, f.make_user("root", role="admin"))
    Node.objects.filter(pk=node.pk).update(retired_at=timezone.now() - timedelta(hours=3))

    with capture_logs() as logs:
        run_until(agent, clock, 5.0, tick=0.25)  # its next heartbeat: refused
        asked = len(client.calls)
        told_at = clock.now
        run_until(agent, clock, 3 * RETIRED_RETRY_MAX_S + 60)  # 46 min of its clock

        refusals = [e for e in logs if e["event"].startswith(RETIRED_LINE)]
        assert not agent.registered and agent.node_state == "retired"
        # 46 min: the refusal, then an attempt every 15 min (3), not one a minute (46).
        assert client.calls[asked - 1:] == ["heartbeat", "register", "register", "register"], client.calls
        assert [e["log_level"] for e in refusals] == ["error", "debug", "debug", "debug"]  # one line at INFO
        first = refusals[0]
        assert first["retry_in_s"] == 900 and first["retry_after_s"] == 900 and first["backoff_max_s"] == 900
        assert first["event"].endswith("asking again as it says, in 15 min")
        assert "an admin returns it to service first" in first["detail"]
        assert agent.next_contact - clock.now <= RETIRED_RETRY_MAX_S
        assert clock.now - told_at >= 3 * RETIRED_RETRY_MAX_S

        nodes.return_to_service(Node.objects.get(pk=node.pk), f.make_user("boss", role="admin"))
        returned_at = clock.now
        while not agent.registered and clock.now - returned_at <= RETIRED_RETRY_MAX_S + 10:
            agent.step()
            clock.now += 5.0

    assert agent.registered, client.calls[-5:]
    assert clock.now - returned_at <= RETIRED_RETRY_MAX_S + 5  # in within the backoff's bound
    assert Node.objects.get(pk=node.pk).state == NodeState.CORDONED
    (back,) = [e for e in logs if e["event"].startswith("returned to service")]
    assert back["log_level"] == "info" and back["refused_attempts"] == 4 and back["retired_for_s"] >= 2700
    assert agent.retired_since is None and agent.retired_refusals == 0
