"""The agent's own rules, with a scripted control plane and a fake clock: generations, stops,
the self-fence on lease loss, re-registration. (End-to-end runs against the real API are in
test_agent_end_to_end.py.)"""

from __future__ import annotations

from collections import deque
from typing import Any

from controlplane.agent.client import Unauthorized, Unreachable
from controlplane.agent.members import SimulatedLauncher
from controlplane.agent.node import NodeAgent, NodeInventory

LEASE_S = 20.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def wall(self) -> float:
        return 1_700_000_000.0 + self.now


class ScriptedControlPlane:
    """Answers like the agent API with what a test scripts; records what the agent sent."""

    def __init__(self, clock: FakeClock | None = None) -> None:
        self.clock = clock
        self.synced_at: list[float] = []
        self.allocations: list[dict[str, Any]] = []
        self.stop: list[int] = []
        self.reregister = False
        self.down = False
        self.refuse_token = False
        self.registrations: list[dict[str, Any]] = []
        self.syncs: list[dict[str, Any]] = []
        self.queued_replies: deque[dict[str, Any]] = deque()

    def register(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.down:
            raise Unreachable("down")
        self.registrations.append(body)
        self.refuse_token = False
        return {"token": f"qma_token{len(self.registrations)}", "lease_s": LEASE_S, "heartbeat_interval_s": 2.0,
                "node_state": "ready"}

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.down:
            raise Unreachable("down")
        if self.refuse_token:
            raise Unauthorized("unknown token")
        self.syncs.append(body)
        if self.clock is not None:
            self.synced_at.append(self.clock.now)
        if self.queued_replies:
            return self.queued_replies.popleft()
        return {"node": "n1", "node_state": "ready", "lease_s": LEASE_S, "heartbeat_interval_s": 2.0,
                "reregister": self.reregister or bool(body.get("goodbye")), "allocations": list(self.allocations), "stop": list(self.stop),
                "stale_reports": []}

    def heartbeat(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._reply(body)

    def report(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._reply(body)

    def reports(self, kind: str) -> list[dict[str, Any]]:
        return [r for body in self.syncs for r in body.get("reports", []) if r["kind"] == kind]


def allocation(generation: int, gpus: list[int], *, state: str = "active", env: dict[str, str] | None = None,
               grace: float | None = None) -> dict[str, Any]:
    return {
        "generation": generation, "epoch": 1, "state": state,
        "job": {"id": generation * 10, "name": f"j{generation}", "command": "", "env": env or {},
                "runtime_limit_s": 3600, "checkpoint_interval_s": None},
        "gpus": gpus, "ranks": list(range(len(gpus))), "world_size": len(gpus), "nnodes": 1, "node_rank": 0,
        "master_addr": "n1", "master_port": 20000 + generation, "started_at": None,
        "release": {"reason": "Preempted", "deadline": "", "grace_remaining_s": grace} if state == "releasing" else None,
    }


def make_agent(plane: ScriptedControlPlane, clock: FakeClock, *, self_fence: bool = True,
               limit_grace_s: float = 30.0) -> NodeAgent:
    return NodeAgent(
        NodeInventory(name="n1", gpu_count=8, simulated=True),
        client=plane,  # type: ignore[arg-type]
        launcher=SimulatedLauncher(clock=clock, wall=clock.wall),
        bootstrap_token="bootstrap",
        interval_s=2.0,
        sample_interval_s=5.0,
        self_fence=self_fence,
        limit_grace_s=limit_grace_s,
        clock=clock,
        wall=clock.wall,
    )


def run_for(agent: NodeAgent, clock: FakeClock, seconds: float, tick: float = 0.25) -> None:
    end = clock.now + seconds
    while clock.now < end:
        agent.step()
        clock.now += tick


def test_registers_then_launches_the_desired_allocation_and_reports_it_started() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(5, [0, 1])]
    agent = make_agent(plane, clock)

    run_for(agent, clock, 1.0)

    assert len(plane.registrations) == 1 and plane.registrations[0]["running"] == []
    assert set(agent.members) == {5}
    assert [r["generation"] for r in plane.reports("started")] == [5]


def test_a_finished_job_is_reported_with_its_exit_code_and_not_launched_again() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(5, [0], env={"QM_SIM_DURATION_S": "1", "QM_SIM_EXIT_CODE": "3"})]
    agent = make_agent(plane, clock)

    run_for(agent, clock, 4.0)

    (exited,) = plane.reports("exited")
    assert exited["generation"] == 5 and exited["exit_code"] == 3
    assert agent.counters["launched"] == 1 and not agent.members


def test_fencing_a_generation_older_than_one_already_seen_on_its_gpus_is_refused() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(9, [2])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 0.5)
    # A reply delivered out of order: an older decision for the same GPU.
    plane.allocations = [allocation(9, [2]), allocation(7, [2, 3])]

    run_for(agent, clock, 2.5)

    assert set(agent.members) == {9}
    assert [r["generation"] for r in plane.reports("refused")] == [7]
    assert agent.counters["refused"] == 1


def test_fencing_a_newer_generation_for_busy_gpus_kills_the_older_member_before_it_launches() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(4, [0])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 0.5)
    old = agent.members[4].member
    plane.allocations = [allocation(8, [0])]

    run_for(agent, clock, 3.0)

    assert old.poll() == -9  # SIGKILLed: stale
    assert set(agent.members) == {8}
    (lost,) = plane.reports("lost")
    assert lost["generation"] == 4


def test_a_releasing_allocation_gets_sigterm_and_sigkill_when_the_grace_runs_out() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    # This job takes 60 s to stop after SIGTERM: longer than its grace.
    plane.allocations = [allocation(3, [0], env={"QM_SIM_STOP_S": "60"})]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 0.5)
    member = agent.members[3].member
    plane.allocations = [allocation(3, [0], state="releasing", grace=5.0, env={"QM_SIM_STOP_S": "60"})]

    run_for(agent, clock, 2.5)
    assert member.terminated_at is not None and member.killed_at is None
    run_for(agent, clock, 5.0)

    (exited,) = plane.reports("exited")
    assert exited["exit_code"] == -9
    assert member.killed_at - member.terminated_at <= 5.0 + 0.25


def test_a_job_that_stops_within_its_grace_exits_on_sigterm() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(3, [0], env={"QM_SIM_STOP_S": "1"})]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 0.5)
    plane.allocations = [allocation(3, [0], state="releasing", grace=30.0, env={"QM_SIM_STOP_S": "1"})]

    run_for(agent, clock, 4.0)

    (exited,) = plane.reports("exited")
    assert exited["exit_code"] == -15


def test_work_the_control_plane_no_longer_lists_is_killed_as_stale() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(6, [0])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 0.5)
    plane.allocations = []

    run_for(agent, clock, 3.0)

    assert not agent.members
    assert [r["generation"] for r in plane.reports("lost")] == [6]


def test_fencing_when_the_lease_cannot_be_renewed_the_agent_kills_its_work_before_the_lease_ends() -> None:
    clock = FakeClock()
    plane = ScriptedControlPlane(clock)
    plane.allocations = [allocation(6, [0])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 3.0)
    member = agent.members[6].member
    plane.down = True

    run_for(agent, clock, LEASE_S)

    # The control plane counts the lease from when it received the last heartbeat, which is
    # no earlier than when the agent sent it.
    last_renewal = plane.synced_at[-1]
    assert member.killed_at is not None
    assert member.killed_at < last_renewal + LEASE_S - 1.0
    assert agent.counters["self_fenced"] == 1 and not agent.registered


def test_after_a_self_fence_the_agent_registers_again_running_nothing_and_reports_the_work_lost() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(6, [0])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)
    plane.down = True
    run_for(agent, clock, LEASE_S)
    plane.down = False
    plane.allocations = []

    run_for(agent, clock, 3.0)

    assert len(plane.registrations) == 2 and plane.registrations[1]["running"] == []
    assert [r["generation"] for r in plane.reports("lost")] == [6]


def test_without_self_fence_a_partitioned_agent_keeps_running_until_told_its_work_is_stale() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(6, [0])]
    agent = make_agent(plane, clock, self_fence=False)
    run_for(agent, clock, 1.0)
    agent.partitioned = True
    run_for(agent, clock, LEASE_S * 2)
    assert set(agent.members) == {6}
    plane.allocations = []
    plane.queued_replies.append({"node": "n1", "node_state": "quarantined", "lease_s": LEASE_S,
                                 "heartbeat_interval_s": 2.0, "reregister": True, "allocations": [], "stop": [6],
                                 "stale_reports": []})

    agent.partitioned = False
    run_for(agent, clock, 3.0)

    assert not agent.members and len(plane.registrations) == 2
    assert plane.registrations[1]["running"] == []


def test_a_refused_token_stops_everything_and_registers_again() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(6, [0])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)
    plane.refuse_token = True
    plane.allocations = []

    run_for(agent, clock, 4.0)

    assert not agent.members and len(plane.registrations) == 2


def test_samples_carry_activity_and_step_deltas_and_progress_the_totals() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(2, [0, 1], env={"QM_SIM_STEPS_PER_S": "10", "QM_SIM_TOKENS_PER_STEP": "100",
                                                    "QM_SIM_ACTIVITY": "0.6"})]
    agent = make_agent(plane, clock)

    run_for(agent, clock, 13.0)

    samples = plane.reports("sample")
    assert len(samples) >= 2
    assert all(s["gpu_activity"] == 0.6 for s in samples)
    total_steps = sum(s["steps"] for s in samples)
    progress = plane.reports("progress")[-1]
    assert progress["steps"] == total_steps and progress["useful_tokens"] == 100 * total_steps
    assert 90 <= total_steps <= 120


def test_reports_that_could_not_be_delivered_are_sent_again() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(5, [0], env={"QM_SIM_DURATION_S": "1"})]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 0.5)
    plane.down = True
    run_for(agent, clock, 3.0)
    assert not plane.reports("exited")
    plane.down = False

    run_for(agent, clock, 2.0)

    assert [r["generation"] for r in plane.reports("exited")] == [5]


def test_shutdown_stops_every_member_and_says_goodbye() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(5, [0]), allocation(6, [1])]
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)

    agent.shutdown(grace_s=2.0)
    run_for(agent, clock, 4.0)

    assert agent.done
    assert sorted(r["generation"] for r in plane.reports("lost")) == [5, 6]
    assert plane.syncs[-1].get("goodbye") is True


def test_a_shutting_down_agent_says_so_from_its_first_contact_until_its_goodbye() -> None:
    """So that its node's idle GPUs take no new work while a slow job stops: the control
    plane learned of the shutdown only from the first job reported stopped."""
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(5, [0], env={"QM_SIM_STOP_S": "3"})]  # takes 3 s to stop
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)
    before = len(plane.syncs)

    agent.shutdown(grace_s=10.0)
    run_for(agent, clock, 6.0)

    after = plane.syncs[before:]
    assert after[0].get("shutting_down") is True and not after[0].get("goodbye")
    assert after[-1].get("goodbye") is True and "shutting_down" not in after[-1]
    assert agent.done


def test_the_agent_stops_a_job_past_its_runtime_limit_when_the_control_plane_cannot_be_reached() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    job = allocation(4, [0], env={"QM_SIM_STOP_S": "60"})  # ignores SIGTERM for a minute
    job["job"]["runtime_limit_s"] = 5
    plane.allocations = [job]
    agent = make_agent(plane, clock, limit_grace_s=3.0)
    run_for(agent, clock, 0.5)
    member = agent.members[4].member
    launched = member.started
    plane.down = True  # the control plane will never send the stop

    run_for(agent, clock, 7.0)
    assert member.terminated_at is None  # limit + grace (8 s) not reached yet
    run_for(agent, clock, 1.5)  # past it, and well before the lease would run out (18 s)
    assert member.terminated_at is not None and member.killed_at is None
    assert 8.0 <= member.terminated_at - launched <= 8.0 + 0.25
    run_for(agent, clock, 3.5)
    assert member.killed_at is not None and member.killed_at - member.terminated_at <= 3.0 + 0.25
    assert agent.counters["limit_stopped"] == 1 and agent.counters["self_fenced"] == 0

    plane.down = False
    run_for(agent, clock, 1.0)
    (exited,) = plane.reports("exited")
    assert exited["generation"] == 4 and exited["exit_code"] == -9


def test_a_job_the_control_plane_stops_in_time_is_left_to_its_release_not_the_agents_limit() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    job = allocation(4, [0], env={"QM_SIM_STOP_S": "60"})
    job["job"]["runtime_limit_s"] = 10
    plane.allocations = [job]
    agent = make_agent(plane, clock, limit_grace_s=3.0)
    run_for(agent, clock, 10.0)
    releasing = allocation(4, [0], state="releasing", grace=20.0, env={"QM_SIM_STOP_S": "60"})
    releasing["job"]["runtime_limit_s"] = 10
    plane.allocations = [releasing]

    run_for(agent, clock, 8.0)  # past limit + the agent's grace: the release's longer grace rules
    member = agent.members[4].member
    assert member.terminated_at is not None and member.killed_at is None
    assert agent.counters["limit_stopped"] == 0


def test_an_unchanged_reply_keeps_the_allocations_of_the_last_full_reply_and_a_later_one_replaces_them() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(7, [0])]
    agent = make_agent(plane, clock)
    base = {"node": "n1", "node_state": "ready", "lease_s": LEASE_S, "heartbeat_interval_s": 2.0,
            "reregister": False, "stale_reports": []}
    plane.queued_replies.append({**base, "allocations": [allocation(7, [0])], "stop": [], "version": "v1:seven"})
    run_for(agent, clock, 0.5)
    assert set(agent.members) == {7}

    for _ in range(4):
        plane.queued_replies.append({**base, "allocations": [], "stop": [], "version": "v1:seven", "unchanged": True})
    run_for(agent, clock, 6.0)

    assert set(agent.members) == {7} and agent.members[7].stop_kind is None  # not taken for "no longer listed"
    assert all(body.get("known") == "v1:seven" for body in plane.syncs[1:])
    plane.queued_replies.clear()
    plane.allocations = []  # a full reply without it: stopped as stale
    run_for(agent, clock, 3.0)
    assert not agent.members


def test_an_unchanged_reply_for_a_version_the_agent_does_not_hold_applies_only_the_stops_and_asks_again() -> None:
    plane, clock = ScriptedControlPlane(), FakeClock()
    agent = make_agent(plane, clock)
    base = {"node": "n1", "node_state": "ready", "lease_s": LEASE_S, "heartbeat_interval_s": 2.0,
            "reregister": False, "stale_reports": []}
    plane.queued_replies.append({**base, "allocations": [allocation(8, [0]), allocation(9, [1])], "stop": [],
                                 "version": "v1:both"})
    run_for(agent, clock, 0.5)
    assert set(agent.members) == {8, 9}

    plane.queued_replies.append({**base, "allocations": [], "stop": [9], "version": "v1:other", "unchanged": True})
    plane.allocations = [allocation(8, [0])]
    run_for(agent, clock, 0.5)

    assert set(agent.members) == {8}
    assert "known" not in plane.syncs[-1]  # it forgot what it held, and got everything again


def test_exits_of_a_burst_of_short_jobs_go_out_in_one_report_and_a_lone_exit_at_once() -> None:
    clock = FakeClock()
    plane = ScriptedControlPlane(clock)
    plane.allocations = [
        allocation(5, [0], env={"QM_SIM_DURATION_S": "0.50"}),
        allocation(6, [1], env={"QM_SIM_DURATION_S": "0.53"}),
        allocation(7, [2], env={"QM_SIM_DURATION_S": "3.0"}),
    ]
    agent = make_agent(plane, clock)

    run_for(agent, clock, 1.2, tick=0.01)

    # 5 and 6 ended 30 ms apart while 7, launched with them, ran on: one report carries both.
    carrying = [body for body in plane.syncs if any(r["kind"] == "exited" for r in body.get("reports", []))]
    assert [[r["generation"] for r in body["reports"] if r["kind"] == "exited"] for body in carrying] == [[5, 6]]

    plane.allocations = [a for a in plane.allocations if a["generation"] == 7]
    ends_at = agent.members[7].started_clock + 3.0
    run_for(agent, clock, 2.5, tick=0.01)

    # 7 ended alone, long after its launch: reported in the round that saw it end.
    last = [i for i, body in enumerate(plane.syncs) if any(r["kind"] == "exited" for r in body.get("reports", []))][-1]
    assert [r["generation"] for r in plane.syncs[last]["reports"] if r["kind"] == "exited"] == [7]
    assert ends_at <= plane.synced_at[last] < ends_at + 0.015


class SlowLauncher(SimulatedLauncher):
    """A real node's launch as the clock sees it: each takes `launch_s` (a cgroup, the run's
    `work/`, `sh` → `setpriv` → `sh -c`: ~22 ms apart on the benchmark's loaded 2 cores)."""

    def __init__(self, clock: FakeClock, launch_s: float) -> None:
        super().__init__(clock=clock, wall=clock.wall)
        self.fake_clock = clock
        self.launch_s = launch_s

    def launch(self, assignment: Any) -> Any:
        member = super().launch(assignment)
        self.fake_clock.now += self.launch_s
        return member


def _slow_launching_agent(plane: ScriptedControlPlane, clock: FakeClock) -> NodeAgent:
    agent = make_agent(plane, clock)
    agent.launcher = SlowLauncher(clock, 0.022)
    return agent


def test_a_burst_whose_launches_outlast_the_start_delay_goes_out_in_one_report_with_all_its_exits() -> None:
    clock = FakeClock()
    plane = ScriptedControlPlane(clock)
    # Eight 30 ms jobs launched 22 ms apart: the starts' 0.1 s is over before the last launch,
    # and when the agent next looks, 7 have ended and the last is about to.
    plane.allocations = [allocation(g, [g - 1], env={"QM_SIM_DURATION_S": "0.03"}) for g in range(1, 9)]
    agent = _slow_launching_agent(plane, clock)

    run_for(agent, clock, 0.5, tick=0.005)

    carrying = [body for body in plane.syncs if any(r["kind"] in ("started", "exited") for r in body["reports"])]
    assert [sorted((r["kind"], r["generation"]) for r in body["reports"] if r["kind"] != "sample")
            for body in carrying] == [
        sorted([("started", g) for g in range(1, 9)] + [("exited", g) for g in range(1, 9)])]


def test_reports_held_for_a_bursts_last_exits_wait_no_longer_than_the_exit_delay() -> None:
    clock = FakeClock()
    plane = ScriptedControlPlane(clock)
    # The same burst but its last job runs on for 3 s: the starts and the 7 exits wait
    # EXIT_REPORT_DELAY_S (50 ms) for it from the round that found them due, no longer.
    plane.allocations = [allocation(g, [g - 1], env={"QM_SIM_DURATION_S": "3.0" if g == 8 else "0.03"})
                         for g in range(1, 9)]
    agent = _slow_launching_agent(plane, clock)
    run_for(agent, clock, 0.02, tick=0.005)  # registered, the desired state taken: all 8 launched
    launched_by = clock.now
    assert len(agent.members) == 8

    run_for(agent, clock, 0.5, tick=0.005)

    carrying = [i for i, body in enumerate(plane.syncs) if any(r["kind"] == "exited" for r in body["reports"])]
    assert len(carrying) == 1
    body = plane.syncs[carrying[0]]
    assert sorted((r["kind"], r["generation"]) for r in body["reports"] if r["kind"] != "sample") == sorted(
        [("started", g) for g in range(1, 9)] + [("exited", g) for g in range(1, 8)])
    assert launched_by + 0.05 <= plane.synced_at[carrying[0]] <= launched_by + 0.005 + 0.05 + 0.005


def test_a_desired_state_from_a_wake_up_is_applied_only_if_nothing_newer_came_since() -> None:
    clock = FakeClock()
    plane = ScriptedControlPlane(clock)
    agent = make_agent(plane, clock)
    run_for(agent, clock, 0.5)  # registered, nothing to run
    syncs = len(plane.syncs)

    # Nothing came since the wait was sent: applied, and no request fetches it.
    agent.prefetched = (agent.held_changes, {"node_state": "ready", "allocations": [allocation(5, [0])], "stop": [],
                                             "version": "v1:a"})
    agent.wake_requested = True
    agent.step()
    assert set(agent.members) == {5} and agent.counters["prefetched"] == 1
    assert not [b for b in plane.syncs[syncs:] if not b.get("reports")]
    assert agent.known_version == "v1:a"

    # Since the next wait was sent, a heartbeat answered "unchanged" for the version held: what
    # the agent holds did not change, so the wake-up's state (a newer bind) still applies.
    sent = agent.held_changes
    plane.queued_replies.append({"node_state": "ready", "lease_s": LEASE_S, "heartbeat_interval_s": 2.0,
                                 "allocations": [], "stop": [], "version": "v1:a", "unchanged": True})
    clock.now += 2.5
    agent.step()
    assert agent.held_changes == sent
    agent.prefetched = (sent, {"node_state": "ready", "allocations": [allocation(5, [0]), allocation(6, [1])],
                               "stop": [], "version": "v1:b"})
    agent.wake_requested = True
    agent.step()
    assert set(agent.members) == {5, 6} and agent.counters["prefetched"] == 2

    # A full reply taken after the wait was sent is newer: the wake-up's state is dropped (it
    # would stop 6, which the newer reply still gives) and the agent asks instead.
    plane.allocations = [allocation(5, [0]), allocation(6, [1])]
    sent = agent.held_changes
    clock.now += 2.5
    agent.step()  # a heartbeat with a full reply
    assert agent.held_changes > sent
    agent.prefetched = (sent, {"node_state": "ready", "allocations": [allocation(5, [0])], "stop": [6],
                               "version": "v1:c"})
    agent.wake_requested = True
    asked = len(plane.syncs)
    agent.step()
    assert set(agent.members) == {5, 6} and agent.members[6].stop_kind is None
    assert agent.counters["prefetched"] == 2 and len(plane.syncs) == asked + 1


def test_a_shutting_down_agent_refuses_work_bound_to_its_node_meanwhile_and_still_says_goodbye() -> None:
    """SIGTERM stops the node's jobs (grace, then SIGKILL) before the goodbye takes it down; until
    then the node is ready and a cycle may bind a new job on the GPUs a stopped job freed. Such a
    job used to be launched: it was stopped by nobody, the goodbye waited for it, and qm-agent
    killed it at its hard deadline and left without a goodbye (its log saying "control plane
    unreachable at shutdown"), so the lease ran out and the node went suspect, then quarantined.
    Now it is refused at once (reported `refused`: the control plane fences and requeues it) and
    the goodbye follows the last stop."""
    plane, clock = ScriptedControlPlane(), FakeClock()
    plane.allocations = [allocation(5, [0]), allocation(6, [1], env={"QM_SIM_STOP_S": "3"})]  # 6 takes 3 s to stop
    agent = make_agent(plane, clock)
    run_for(agent, clock, 1.0)

    agent.shutdown(grace_s=10.0)
    run_for(agent, clock, 1.0)
    assert 5 not in agent.members and 6 in agent.members  # 5 is gone, 6 still stopping
    plane.allocations = [allocation(6, [1]), allocation(7, [0])]  # a cycle binds job 70 on GPU 0
    run_for(agent, clock, 6.0)

    assert [r["generation"] for r in plane.reports("refused")] == [7]
    assert plane.reports("refused")[0]["message"] == "stopped: shutdown"
    assert agent.done
    assert plane.syncs[-1].get("goodbye") is True
