"""The agent's launch journal (controlplane/agent/launch_journal.py), against a scripted control
plane: a launch is on the disk before its member exists, forgotten once a reply came to the
contact carrying its start, named by the next registration while it is not, and a launch whose
entry cannot be written never runs. (With real processes and the real API:
test_agent_takeover_never_runs_a_launch_twice.py.)"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from controlplane.agent.launch_journal import LAUNCHES_DIR, LaunchJournal
from controlplane.agent.members import Assignment, Member, SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory


def _allocation(generation: int) -> dict[str, Any]:
    return {"generation": generation, "epoch": 1, "state": "active",
            "job": {"id": generation, "name": "j", "command": "train", "env": {}},
            "gpus": [0], "ranks": [0], "world_size": 1, "nnodes": 1, "node_rank": 0, "master_addr": "gpu-j",
            "master_port": 20000 + generation, "release": None}


class ScriptedControlPlane:
    """Registers anyone; gives `given` to run; keeps every body it was sent."""

    def __init__(self, given: list[int]) -> None:
        self.given = given
        self.registrations: list[dict[str, Any]] = []
        self.contacts: list[dict[str, Any]] = []

    def _reply(self) -> dict[str, Any]:
        return {"lease_s": 20.0, "heartbeat_interval_s": 1.0, "node_state": "ready", "stop": [], "version": None,
                "unchanged": False, "allocations": [_allocation(g) for g in self.given]}

    def register(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        self.registrations.append(body)
        return {**self._reply(), "token": "qma_test", "settled_generations": []}

    def heartbeat(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        self.contacts.append(body)
        return self._reply()

    report = heartbeat


class CheckingLauncher(SimulatedLauncher):
    """A simulated launcher that notes, at each launch, whether the journal already held it."""

    def __init__(self, journal_dir: Path) -> None:
        super().__init__()
        self.journal_dir = journal_dir
        self.on_disk_at_launch: dict[int, bool] = {}

    def launch(self, assignment: Assignment) -> Member:
        self.on_disk_at_launch[assignment.generation] = (self.journal_dir / str(assignment.generation)).exists()
        return super().launch(assignment)


def _agent(plane: ScriptedControlPlane, launcher: SimulatedLauncher, journal: LaunchJournal) -> NodeAgent:
    inventory = NodeInventory(name="gpu-j", gpu_count=8, gpu_type="H100-80GB")
    return NodeAgent(inventory, client=plane, launcher=launcher, bootstrap_token="secret",  # type: ignore[arg-type]
                     interval_s=0.05, sample_interval_s=60.0, launch_journal=journal)


def test_a_launch_is_kept_before_it_runs_and_forgotten_once_its_start_was_taken(tmp_path: Path) -> None:
    path = tmp_path / "gpu-j" / LAUNCHES_DIR
    plane = ScriptedControlPlane(given=[7])
    launcher = CheckingLauncher(path)
    agent = _agent(plane, launcher, LaunchJournal(path))

    agent.step()  # registers
    agent.step()  # and launches what it is given
    assert launcher.on_disk_at_launch == {7: True}
    assert plane.registrations[0]["launched"] == []
    assert LaunchJournal(path).left() == [7]  # a successor would read it

    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        time.sleep(min(agent.step(), 0.05))
        if any(r["kind"] == "started" for body in plane.contacts for r in body["reports"]):
            break
    assert LaunchJournal(path).left() == []


def test_a_successor_names_what_was_launched_unreported_and_then_forgets_it(tmp_path: Path) -> None:
    path = tmp_path / "gpu-j" / LAUNCHES_DIR
    LaunchJournal(path).record(7)  # the predecessor launched 7 and died before telling
    found = LaunchJournal(path)
    found.found([9])  # and its run 9 was found alive by the sweep, its entry lost
    plane = ScriptedControlPlane(given=[])
    agent = _agent(plane, SimulatedLauncher(), found)

    agent.step()

    assert plane.registrations[0]["launched"] == [7, 9]
    assert LaunchJournal(path).left() == []


def test_a_launch_that_cannot_be_kept_never_runs(tmp_path: Path) -> None:
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")  # the journal's directory cannot be made: a file has its name
    plane = ScriptedControlPlane(given=[7])
    launcher = CheckingLauncher(blocked / LAUNCHES_DIR)
    agent = _agent(plane, launcher, LaunchJournal(blocked / LAUNCHES_DIR))

    agent.step()
    for _ in range(5):
        agent.step()

    assert launcher.on_disk_at_launch == {} and agent.members == {}
    (ended,) = [r for body in plane.contacts for r in body["reports"] if r["generation"] == 7]
    assert ended["kind"] == "exited" and ended["exit_code"] == 126 and ended["message"].startswith("launch failed:")


def test_a_successor_tells_the_exits_left_untold_before_it_registers_and_names_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "gpu-j" / LAUNCHES_DIR
    before = LaunchJournal(path)
    for generation in (5, 6, 7):
        before.record(generation)
    exited = {"kind": "exited", "generation": 5, "at": "2026-12-08T01:00:00+00:00", "exit_code": 0, "message": ""}
    lost = {"kind": "lost", "generation": 6, "at": "2026-12-08T01:00:00+00:00", "exit_code": -9,
            "message": "stopped: lease"}
    before.ended(5, exited)
    before.ended(6, lost)
    plane = ScriptedControlPlane(given=[9])
    agent = _agent(plane, SimulatedLauncher(), LaunchJournal(path))
    agent.token = "qma_kept"  # the node's token, from the state directory

    agent.step()  # the exit left untold, with the node's token, before anything else
    assert plane.registrations == [] and [body["reports"] for body in plane.contacts] == [[exited]]
    assert agent.members == {} and not agent.registered  # its reply's desired state is not taken
    agent.step()

    # The run stopped for the agent's own reason, and the one whose end is unknown, are named.
    assert plane.registrations[0]["launched"] == [6, 7]
    assert LaunchJournal(path).left() == []
