"""A contact the control plane refuses (400) for one of its elements no longer wedges the node.

A heartbeat or report carries the node's lease, every run's reports and output chunks in one
body, and the control plane validates it whole: one element it refuses (a report whose words hold
a lone surrogate, a chunk of more characters than bytes) makes it a 400 naming that element
(`reports.0.message`), and nothing of it is applied. Until 6 Dec the agent kept the same
reports and sent them again every round: the node's heartbeats and every other run's exits never
got through, its lease ran out and its runs were fenced. Now the agent takes out what the 400
names, writes it with the control plane's words to `refused.jsonl` in its state directory, logs
one error naming the run and the field, sends the rest at once and never sends the refused
element again; an exit refused for its words only goes again without them. A 400 that names no
element is isolated by sending the contact's parts apart (controlplane/agent/node.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from structlog.testing import capture_logs

from controlplane.agent.client import AgentClient, Refused
from controlplane.agent.main import _send_batch
from controlplane.agent.members import Assignment, Member, SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory, iso
from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Allocation, Event, Job, Node
from controlplane.services import cycle
from tests.controlplane.agent.test_node_agent import (
    FakeClock,
    ScriptedControlPlane,
    allocation,
    make_agent,
    run_for,
)
from tests.controlplane.loop_fixtures import BOOTSTRAP, build_loop_fleet, make_job

#: What a path on the node that is not UTF-8 reads as in Python (surrogateescape): words naming it
#: carry a lone surrogate, which JSON carries and the control plane refuses.
NOT_UTF8_PATH = "/scratch/caf\udce9/run"


class RecordingClient(AgentClient):
    """The real HTTP client; keeps every heartbeat/report body and whether it was taken."""

    def __init__(self, server: str) -> None:
        super().__init__(server)
        self.sent: list[tuple[dict[str, Any], bool]] = []

    def _sync(self, send: Callable[[], dict[str, Any]], body: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = send()
        except Exception:
            self.sent.append((json.loads(json.dumps(body)), False))
            raise
        self.sent.append((json.loads(json.dumps(body)), True))
        return reply

    def heartbeat(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._sync(lambda: super(RecordingClient, self).heartbeat(node, token, body), body)

    def report(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._sync(lambda: super(RecordingClient, self).report(node, token, body), body)


class LaunchFailsOnAPathNotUtf8(SimulatedLauncher):
    """Simulated runs, but job `fails`'s launch fails with words naming a path that is not UTF-8
    (an OSError of one argument says it as written: no repr escapes the surrogate)."""

    def __init__(self, fails: int) -> None:
        super().__init__()
        self.fails = fails

    def launch(self, assignment: Assignment) -> Member:
        if assignment.job_id == self.fails:
            raise OSError(f"cannot prepare the run's directory {NOT_UTF8_PATH}")
        return super().launch(assignment)


def drive(agent: NodeAgent, until: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(min(agent.step(), 0.05))
        if until():
            return
    raise AssertionError(f"timed out waiting for {what}")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.django_db(transaction=True)
def test_an_exit_the_control_plane_refuses_is_set_aside_and_the_rest_of_the_node_goes_on(
        live_server: Any, tmp_path: Path) -> None:
    fleet = build_loop_fleet()
    broken = make_job(fleet, name="broken", env={"QM_SIM_DURATION_S": "60"})
    client = RecordingClient(live_server.url)
    agent = NodeAgent(NodeInventory(name="gpu-bad", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64, memory_gb=512,
                                    leaf_switch="leaf-1", spine="spine-1"),
                      client=client, launcher=LaunchFailsOnAPathNotUtf8(broken.pk), bootstrap_token=BOOTSTRAP,
                      interval_s=0.3, sample_interval_s=60.0, refused_path=tmp_path / "gpu-bad" / "refused.jsonl")
    drive(agent, lambda: Node.objects.filter(name="gpu-bad", state=NodeState.READY).exists(), 30, "registration")
    short = make_job(fleet, name="short", env={"QM_SIM_DURATION_S": "1.5"})
    assert cycle.run_cycle("test").binds == 2
    bad_generation = Allocation.objects.get(job=broken).generation

    with capture_logs() as logs:
        # Another run's exit reaches the control plane: before, the contact carrying the refused
        # launch failure was sent again and again, this exit with it, and the job never ended.
        drive(agent, lambda: Job.objects.get(pk=short.pk).state == JobState.SUCCEEDED, 30, "the short job's exit")
        refused_at = timezone.now()
        heard = Node.objects.get(name="gpu-bad").last_heartbeat_at
        drive(agent, lambda: Node.objects.get(name="gpu-bad").last_heartbeat_at > refused_at, 10,
              "a heartbeat after the refusal")
        assert heard is not None

    # The refused report went once, and never again: the 400 named it, the rest went on.
    carrying = [(body, taken) for body, taken in client.sent
                if any("\udce9" in r.get("message", "") for r in body.get("reports", []))]
    assert [taken for _, taken in carrying] == [False]
    # Its run's exit went again without the words the control plane refused: the job ends.
    broken.refresh_from_db()
    assert broken.state == JobState.FAILED and broken.exit_code == 126
    (again,) = [r for body, taken in client.sent if taken for r in body.get("reports", [])
                if r["generation"] == bad_generation and r["kind"] == "exited"]
    assert again["message"].startswith("the control plane refused this report as the agent first sent it (reports.0.")
    # Kept on the node, with the control plane's words, for an operator to read.
    (kept,) = _lines(tmp_path / "gpu-bad" / "refused.jsonl")
    assert kept["node"] == "gpu-bad" and kept["status"] == 400 and kept["element"] == "reports.0"
    assert kept["generation"] == bad_generation and kept["kind"] == "exited"
    assert kept["data"]["message"].endswith(NOT_UTF8_PATH) and kept["data"]["exit_code"] == 126
    assert kept["sent_again"] == again
    assert list(kept["errors"]) == ["reports.0.message"] and "urrogate" in kept["errors"]["reports.0.message"][0]
    (said,) = [e for e in logs if e["event"].startswith("the control plane refused part of a contact")]
    assert said["log_level"] == "error" and said["generation"] == bad_generation
    assert said["field"] == "reports.0.message" and said["kept_in"] == str(tmp_path / "gpu-bad" / "refused.jsonl")
    # and the control plane recorded it for the node, for an operator to read there
    (event,) = Event.objects.filter(node__name="gpu-bad", kind=EventKind.NODE_AGENT_REFUSED)
    assert list(event.data["errors"]) == ["reports.0.message"] and event.data["generations"] == [bad_generation]


# ---------------------------------------------------------------------- the agent's rounds


class RefusingControlPlane(ScriptedControlPlane):
    """A scripted control plane that validates a contact whole, as the real one does: a 400 if
    any element is `poisoned`, naming each such element (`names`) or none (as a proxy's or an
    older control plane's 400 might); `frame` refuses the contact whatever it carries."""

    def __init__(self, clock: FakeClock, poisoned: Callable[[str, dict[str, Any]], bool], *,
                 names: bool = True, field: str = "message") -> None:
        super().__init__(clock)
        self.poisoned = poisoned
        self.names = names
        self.field = field
        self.frame = False
        self.contacts: list[tuple[dict[str, Any], bool]] = []  # (body, taken)

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        errors = {f"{kind}.{i}.{self.field if kind == 'reports' else 'text'}": ["Not what this field takes."]
                  for kind in ("reports", "logs") for i, element in enumerate(body.get(kind, []))
                  if self.poisoned(kind, element)}
        if errors or self.frame:
            self.contacts.append((body, False))
            if not self.names:
                raise Refused(400, "Invalid request.")
            raise Refused(400, "Invalid request. " + " ".join(f"{k}: Not what this field takes." for k in errors),
                          errors)
        self.contacts.append((body, True))
        return super()._reply(body)

    def taken(self, kind: str) -> list[dict[str, Any]]:
        return [e for body, taken in self.contacts if taken for e in body.get(kind, [])]


def _agent(plane: ScriptedControlPlane, clock: FakeClock, tmp_path: Path) -> NodeAgent:
    agent = make_agent(plane, clock)
    agent.refused_path = tmp_path / "n1" / "refused.jsonl"
    return agent


def test_an_output_chunk_the_control_plane_refuses_is_set_aside_and_the_rank_ships_on_past_it(tmp_path: Path) -> None:
    clock = FakeClock()
    plane = RefusingControlPlane(clock, lambda kind, e: kind == "logs" and "[sim] job 50 " in e["text"])
    plane.allocations = [allocation(5, [0], env={"QM_SIM_LOG_EVERY_S": "1"})]
    agent = _agent(plane, clock, tmp_path)

    with capture_logs() as logs:
        run_for(agent, clock, 6.0)

    refused = [body for body, taken in plane.contacts if not taken]
    assert len(refused) == 1  # never sent again
    (chunk,) = [c for c in refused[0]["logs"] if "[sim] job 50 " in c["text"]]
    shipped = plane.taken("logs")
    assert shipped and all("[sim] job 50 " not in c["text"] for c in shipped)
    assert shipped[0]["offset"] == chunk["offset"] + chunk["bytes"]  # read on past it, nothing twice
    assert [r["generation"] for r in plane.taken("reports") if r["kind"] == "started"] == [5]
    (kept,) = _lines(tmp_path / "n1" / "refused.jsonl")
    assert kept["kind"] == "output" and kept["generation"] == 5 and kept["data"] == chunk
    assert list(kept["errors"]) == [f"logs.{refused[0]['logs'].index(chunk)}.text"]
    (said,) = [e for e in logs if e["event"].startswith("the control plane refused part of a contact")]
    assert said["kind"] == "output" and said["field"] == kept["element"] + ".text"


def test_an_ending_refused_for_its_exit_code_goes_again_once_with_none_and_its_own_words(tmp_path: Path) -> None:
    clock = FakeClock()
    plane = RefusingControlPlane(clock, lambda kind, e: kind == "reports" and e.get("exit_code") == 300,
                                 field="exit_code")
    agent = _agent(plane, clock, tmp_path)
    run_for(agent, clock, 1.0)
    lost = {"kind": "lost", "generation": 9, "at": iso(clock.wall()), "exit_code": 300, "message": "stopped: stale"}
    agent._queue(lost)
    agent.urgent = True

    run_for(agent, clock, 1.0)

    assert plane.taken("reports") == [{**lost, "exit_code": None}]  # its instant and words as they were
    (kept,) = _lines(tmp_path / "n1" / "refused.jsonl")
    assert kept["data"] == lost and kept["sent_again"] == {**lost, "exit_code": None}
    assert not agent.outbox and agent.counters["set_aside"] == 1


def test_a_400_naming_nothing_is_isolated_by_sending_the_contacts_parts_apart(tmp_path: Path) -> None:
    """One report of many poisoned, and the 400 names none: the heartbeat alone first, then the
    reports in halves; the poisoned one is set aside after a few contacts, every other one is
    taken once, and the lease is renewed all along."""
    clock = FakeClock()
    plane = RefusingControlPlane(clock, lambda kind, e: kind == "reports" and e.get("message") == "poison",
                                 names=False)
    agent = _agent(plane, clock, tmp_path)
    run_for(agent, clock, 1.0)
    for generation in range(1, 21):
        agent._queue({"kind": "exited", "generation": generation, "at": iso(clock.wall()), "exit_code": 0,
                      "message": "poison" if generation == 13 else ""})
    agent.urgent = True  # as an exit makes it
    before = len(plane.contacts)

    with capture_logs() as logs:
        run_for(agent, clock, 3.0)  # a contact a round, a round each 0.25 s

    contacts = plane.contacts[before:]
    assert contacts[1] == ({"running": [], "reports": []}, True)  # the heartbeat alone, taken
    taken = plane.taken("reports")
    # every other report once; 13, an exit, once as well: again, without the words refused
    assert sorted(r["generation"] for r in taken) == list(range(1, 21))
    (again,) = [r for r in taken if r["generation"] == 13]
    assert again["message"].startswith("the control plane refused this report as the agent first sent it")
    # the whole, then the half holding it at each size (10, 5, 3), then it alone: the rest taken once
    assert [len(body["reports"]) for body, taken in contacts if not taken] == [20, 10, 5, 3, 1]
    assert not agent.parts and not agent.outbox
    (kept,) = _lines(tmp_path / "n1" / "refused.jsonl")
    assert kept["data"]["generation"] == 13 and kept["errors"] == {} and kept["detail"] == "Invalid request."
    assert [e["log_level"] for e in logs if e["event"].startswith("the control plane refused")] == [
        "warning", "error"]
    assert agent.registered and agent.lease_valid_until > clock.now


def test_a_heartbeat_refused_for_its_own_fields_is_refused_whole_as_before(tmp_path: Path) -> None:
    clock = FakeClock()
    plane = RefusingControlPlane(clock, lambda kind, e: False, names=False)
    agent = _agent(plane, clock, tmp_path)
    run_for(agent, clock, 1.0)
    agent._queue({"kind": "exited", "generation": 4, "at": iso(clock.wall()), "exit_code": 0})
    plane.frame = True
    before = len(plane.contacts)

    with capture_logs() as logs:
        run_for(agent, clock, 4.0)

    # the contact, then the heartbeat alone (refused: its own fields), then nothing for 5 s
    assert [(sorted(body), taken) for body, taken in plane.contacts[before:]] == [
        (["reports", "running"], False), (["reports", "running"], False)]
    assert [r["generation"] for r in agent.outbox] == [4] and not agent.parts  # kept, not set aside
    assert not (tmp_path / "n1" / "refused.jsonl").exists()
    assert [e for e in logs if e["event"] == "control plane refused the request"]
    plane.frame = False
    run_for(agent, clock, 3.0)
    assert [r["generation"] for r in plane.taken("reports")] == [4]


# ---------------------------------------------------------------------- simulated nodes' batches


@pytest.mark.django_db(transaction=True)
def test_a_batch_refused_for_one_nodes_report_sets_that_report_aside_and_the_others_go_on(
        live_server: Any, tmp_path: Path) -> None:
    """`qm-agent --simulate` sends many nodes' contacts in one request, validated whole: a 400
    names `nodes.1.reports.0.message`. That node sets its report aside; the others send theirs
    again at once. Before, every node of the batch kept its contact and was refused with it."""
    build_loop_fleet()
    client = AgentClient(live_server.url)
    agents = [NodeAgent(NodeInventory(name=f"sim-{i}", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64,
                                      memory_gb=512, leaf_switch="leaf-1", spine="spine-1", simulated=True),
                        client=client, launcher=SimulatedLauncher(), bootstrap_token=BOOTSTRAP, interval_s=0.3,
                        refused_path=tmp_path / f"sim-{i}" / "refused.jsonl") for i in range(2)]
    for agent in agents:
        drive(agent, lambda agent=agent: agent.registered, 30, "registration")
    now = iso(time.time())
    agents[0]._queue({"kind": "exited", "generation": 7, "at": now, "exit_code": 0, "message": "fine"})
    agents[1]._queue({"kind": "exited", "generation": 8, "at": now, "exit_code": 1, "message": f"bad {NOT_UTF8_PATH}"})

    def round_of_batch() -> list[dict[str, Any]]:
        calls = []
        for agent in agents:
            agent.urgent = True
            call = agent.begin()
            assert call is not None and call.kind == "heartbeat"
            calls.append((agent, call))
        _send_batch(client, calls)
        for agent in agents:
            agent.end()
        return [dict(call.body) for _, call in calls]

    first = round_of_batch()
    assert [r["generation"] for r in first[0]["reports"]] == [7] and [r["generation"] for r in first[1]["reports"]] == [8]
    assert [r["generation"] for r in agents[0].outbox] == [7]  # sent again next
    # node 1's ending goes again without its words; node 0's as it was
    (again,) = agents[1].outbox
    assert again == {"kind": "exited", "generation": 8, "at": now, "exit_code": 1, "message": again["message"]}
    assert again["message"].startswith("the control plane refused this report as the agent first sent it")
    (kept,) = _lines(tmp_path / "sim-1" / "refused.jsonl")
    assert kept["node"] == "sim-1" and list(kept["errors"]) == ["reports.0.message"] and kept["generation"] == 8
    assert not (tmp_path / "sim-0" / "refused.jsonl").exists()

    second = round_of_batch()
    assert [r["generation"] for r in second[0]["reports"]] == [7] and [r["generation"] for r in second[1]["reports"]] == [8]
    assert not agents[0].outbox and not agents[1].outbox  # taken


# ---------------------------------------------------------------------- a long queue


@pytest.mark.django_db(transaction=True)
def test_a_queue_longer_than_a_contact_takes_goes_in_several_contacts_none_refused(
        live_server: Any, tmp_path: Path) -> None:
    """The control plane takes at most 2,000 reports a contact (a 400 naming `reports` beyond);
    the agent queues up to 5,000 (a long partition). Before, it sent them all in one contact,
    refused again and again."""
    build_loop_fleet()
    client = RecordingClient(live_server.url)
    agent = NodeAgent(NodeInventory(name="gpu-long", gpu_count=8, pool="h100", gpu_type="H100-80GB", cpus=64,
                                    memory_gb=512, leaf_switch="leaf-1", spine="spine-1"),
                      client=client, launcher=SimulatedLauncher(), bootstrap_token=BOOTSTRAP, interval_s=0.3,
                      sample_interval_s=60.0, refused_path=tmp_path / "gpu-long" / "refused.jsonl")
    drive(agent, lambda: agent.registered, 30, "registration")
    at = iso(time.time())
    for generation in range(1, 2501):  # runs the control plane never bound: stale, taken
        agent._queue({"kind": "exited", "generation": generation, "at": at, "exit_code": 0})
    agent.urgent = True

    drive(agent, lambda: not agent.outbox and not agent.parts, 60, "the queue to be taken")

    carrying = [(len(body["reports"]), taken) for body, taken in client.sent if body.get("reports")]
    assert carrying == [(2000, True), (500, True)]
    assert not (tmp_path / "gpu-long" / "refused.jsonl").exists()
