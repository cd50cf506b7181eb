"""Real processes: the rank environment, SIGTERM → grace → SIGKILL, progress files, and no
process outliving its agent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from controlplane.agent.members import Assignment, ProcessLauncher, ProcessMember
from controlplane.agent.node import NodeAgent, NodeInventory
from tests.controlplane.agent.test_node_agent import ScriptedControlPlane, allocation


def assignment(command: str, *, gpus: tuple[int, ...] = (0,), ranks: tuple[int, ...] = (0,), world_size: int = 1,
               env: dict[str, str] | None = None, generation: int = 7) -> Assignment:
    return Assignment(
        generation=generation, state="active", job_id=70, job_name="j", command=command, env=env or {}, gpus=gpus,
        ranks=ranks, world_size=world_size, nnodes=2 if world_size > len(gpus) else 1, node_rank=1 if ranks[0] else 0,
        master_addr="gpu-a", master_port=20007, checkpoint_interval_s=None, runtime_limit_s=3600, release=None,
    )


def wait_exit(member: ProcessMember, timeout: float = 60.0) -> int:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        code = member.poll()
        if code is not None:
            return code
        time.sleep(0.02)
    raise AssertionError("member did not exit in time")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def kill_if_alive(pid: int | None) -> None:
    """SIGKILL a process a test left behind (an escaped or stray child), if it is still there."""
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_each_gpu_gets_a_process_with_the_torch_distributed_environment(tmp_path: Path) -> None:
    command = 'env | grep -E "^(CUDA_VISIBLE_DEVICES|WORLD_SIZE|RANK|LOCAL_RANK|MASTER_ADDR|MASTER_PORT|NODE_RANK|QM_GENERATION)=" | sort > env.$LOCAL_RANK'
    member = ProcessMember(assignment(command, gpus=(4, 5), ranks=(2, 3), world_size=4), workdir=tmp_path,
                           node_name="gpu-b", devices=None)

    assert wait_exit(member) == 0

    first = (tmp_path / "env.0").read_text().split()
    second = (tmp_path / "env.1").read_text().split()
    assert "CUDA_VISIBLE_DEVICES=4,5" in first and "CUDA_VISIBLE_DEVICES=4,5" in second
    assert {"RANK=2", "LOCAL_RANK=0", "WORLD_SIZE=4", "MASTER_ADDR=gpu-a", "MASTER_PORT=20007", "NODE_RANK=1",
            "QM_GENERATION=7"} <= set(first)
    assert {"RANK=3", "LOCAL_RANK=1", "WORLD_SIZE=4"} <= set(second)


def test_per_node_launch_starts_one_process_for_a_launcher_like_torchrun(tmp_path: Path) -> None:
    command = 'echo "$WORLD_SIZE $RANK $NNODES $LOCAL_WORLD_SIZE" >> launches'
    member = ProcessMember(assignment(command, gpus=(0, 1, 2, 3), ranks=(4, 5, 6, 7), world_size=8,
                                      env={"QM_LAUNCH": "per_node"}),
                           workdir=tmp_path, node_name="gpu-b", devices=None)

    assert wait_exit(member) == 0
    assert (tmp_path / "launches").read_text().split("\n")[:-1] == ["2 1 2 4"]


def test_the_exit_code_is_the_first_failing_ranks(tmp_path: Path) -> None:
    member = ProcessMember(assignment('[ "$LOCAL_RANK" = 1 ] && exit 4; exit 0', gpus=(0, 1), ranks=(0, 1),
                                      world_size=2), workdir=tmp_path, node_name="n", devices=None)

    assert wait_exit(member) == 4


def test_when_one_rank_dies_the_others_are_stopped(tmp_path: Path) -> None:
    member = ProcessMember(assignment('[ "$LOCAL_RANK" = 1 ] && exit 9; exec sleep 30', gpus=(0, 1), ranks=(0, 1),
                                      world_size=2), workdir=tmp_path, node_name="n", devices=None)

    started = time.monotonic()
    assert wait_exit(member, 60) == 9
    assert time.monotonic() - started < 20  # stopped, not left to sleep its 30 s


def test_sigterm_lets_a_job_exit_and_sigkill_ends_one_that_ignores_it(tmp_path: Path) -> None:
    polite = ProcessMember(assignment("trap 'exit 0' TERM; touch trapped; sleep 30 & wait"), workdir=tmp_path / "polite",
                           node_name="n", devices=None)
    stubborn = ProcessMember(assignment("trap '' TERM; touch trapped; sleep 30 & wait; sleep 30", generation=8),
                             workdir=tmp_path / "stubborn",
                             node_name="n", devices=None)
    # each shell has set its trap (a 0.3-s sleep here let a loaded machine's SIGTERM come first)
    for workdir in (tmp_path / "polite", tmp_path / "stubborn"):
        deadline = time.monotonic() + 60
        while not (workdir / "trapped").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (workdir / "trapped").exists()

    polite.terminate()
    stubborn.terminate()

    assert wait_exit(polite) == 0
    time.sleep(0.5)
    assert stubborn.poll() is None
    stubborn.kill()
    assert wait_exit(stubborn) == -signal.SIGKILL


def test_progress_lines_of_rank_zero_are_read_as_running_totals(tmp_path: Path) -> None:
    command = textwrap.dedent("""\
        echo '{"steps": 10, "useful_tokens": 40960}' >> "$QM_PROGRESS_FILE"
        echo '{"steps": 20, "useful_tokens": 81920, "checkpoint": true, "gpu_activity": 0.7}' >> "$QM_PROGRESS_FILE"
        echo 'not json' >> "$QM_PROGRESS_FILE"
    """)
    member = ProcessMember(assignment(command), workdir=tmp_path, node_name="n", devices=None)

    assert wait_exit(member) == 0
    progress = member.progress()

    assert (progress.steps, progress.useful_tokens) == (20, 81920)
    assert progress.last_checkpoint_at is not None and progress.gpu_activity == 0.7
    assert member.activity() == 0.7


def test_a_job_without_a_command_fails_with_127(tmp_path: Path) -> None:
    member = ProcessMember(assignment(""), workdir=tmp_path, node_name="n", devices=None)

    assert member.poll() == 127


@pytest.mark.parametrize("how", ["setpriv", "pre-exec hook"])
def test_job_processes_die_with_their_agent(tmp_path: Path, how: str) -> None:
    # setpriv --pdeathsig where util-linux has it (vfork, cheap); the pre-exec hook otherwise.
    env = {**os.environ, "QM_AGENT_PREEXEC_PDEATHSIG": "1" if how == "pre-exec hook" else "0"}
    if how == "setpriv":
        from controlplane.agent.members import _find_setpriv

        if _find_setpriv() is None:
            pytest.skip("no setpriv with --pdeathsig on this machine")
    script = textwrap.dedent(f"""\
        import sys, time
        sys.path.insert(0, {str(Path.cwd())!r})
        from pathlib import Path
        from controlplane.agent.members import ProcessMember
        from tests.controlplane.agent.test_process_member import assignment
        m = ProcessMember(assignment("exec sleep 60"), workdir=Path({str(tmp_path)!r}), node_name="n", devices=None)
        print(m.procs[0].pid, flush=True)
        time.sleep(60)
    """)
    agent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env)
    child = int(agent.stdout.readline())
    assert alive(child)
    # the death signal is set (by setpriv or the hook) just before the job's command is exec'd:
    # an agent killed before that, as this test did on a loaded machine, leaves the child to
    # the reaper and the next agent's sweep, not to PR_SET_PDEATHSIG
    deadline = time.monotonic() + 60
    while Path(f"/proc/{child}/comm").read_text().strip() != "sleep" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert Path(f"/proc/{child}/comm").read_text().strip() == "sleep", "the job's command never started"

    agent.kill()
    agent.wait()

    deadline = time.monotonic() + 30
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_a_restarted_agent_kills_what_its_predecessor_left_behind(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-07", devices=None)
    member = launcher.launch(assignment("sleep 60 & echo $! > child.pid; wait"))
    pid = member.procs[0].pid  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    pid_file = tmp_path / "gpu-07" / "g7" / "child.pid"
    # the shell creates the file (the redirection) before echo writes to it: wait for a whole line
    while not (pid_file.exists() and pid_file.read_text().endswith("\n")) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pid_file.read_text().endswith("\n"), "the job never wrote its child's pid"
    child = int(pid_file.read_text())

    killed = ProcessLauncher(tmp_path, "gpu-07", devices=None).sweep_leftovers()

    assert killed == sorted([pid, child])
    assert wait_exit(member) == -signal.SIGKILL  # type: ignore[arg-type]


def test_the_sweep_finds_children_whose_group_leader_is_gone(tmp_path: Path) -> None:
    launcher = ProcessLauncher(tmp_path, "gpu-07", devices=None)
    member = launcher.launch(assignment("sleep 60 & echo $! > child.pid; exit 0"))
    leader = member.procs[0].pid  # type: ignore[attr-defined]
    member.procs[0].wait()  # type: ignore[attr-defined]
    child = int((tmp_path / "gpu-07" / "g7" / "child.pid").read_text())
    assert alive(child) and not alive(leader)

    assert ProcessLauncher(tmp_path, "gpu-07", devices=None).sweep_leftovers() == [child]
    deadline = time.monotonic() + 30
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)


def test_the_sweep_leaves_processes_of_other_nodes_alone(tmp_path: Path) -> None:
    member = ProcessLauncher(tmp_path, "gpu-07", devices=None).launch(assignment("exec sleep 60"))
    # Another node's records pointing at this process (a recycled pid, say).
    other = tmp_path / "gpu-08" / "g1"
    other.mkdir(parents=True)
    (other / "pgids").write_text(f"{member.procs[0].pid}\n")  # type: ignore[attr-defined]

    assert ProcessLauncher(tmp_path, "gpu-08", devices=None).sweep_leftovers() == []
    assert member.poll() is None
    member.kill()
    wait_exit(member)  # type: ignore[arg-type]


@pytest.mark.parametrize("grace", [1.0])
def test_an_agent_stops_a_preempted_real_job_within_its_grace(tmp_path: Path, grace: float) -> None:
    plane = ScriptedControlPlane()
    job = allocation(11, [0])
    job["job"]["command"] = "trap '' TERM; sleep 60 & wait; sleep 60"
    plane.allocations = [job]
    agent = NodeAgent(NodeInventory(name="n1", gpu_count=1), client=plane,  # type: ignore[arg-type]
                      launcher=ProcessLauncher(tmp_path, "n1", devices=None), bootstrap_token="b", interval_s=0.2)
    for _ in range(20):
        agent.step()
        time.sleep(0.02)
    assert 11 in agent.members
    releasing = allocation(11, [0], state="releasing", grace=grace)
    releasing["job"]["command"] = job["job"]["command"]
    plane.allocations = [releasing]

    started = time.monotonic()
    while agent.members and time.monotonic() - started < 10:
        agent.step()
        time.sleep(0.02)

    assert not agent.members
    assert grace <= time.monotonic() - started < grace + 2.0
    (exited,) = plane.reports("exited")
    assert exited["exit_code"] == -signal.SIGKILL


def test_progress_written_by_a_real_job_reaches_the_control_plane_as_samples(tmp_path: Path) -> None:
    plane = ScriptedControlPlane()
    job = allocation(12, [0])
    job["job"]["command"] = 'for i in 1 2 3 4 5; do echo "{\\"steps\\": $((i*10))}" >> "$QM_PROGRESS_FILE"; sleep 0.1; done'
    plane.allocations = [job]
    agent = NodeAgent(NodeInventory(name="n1", gpu_count=1), client=plane,  # type: ignore[arg-type]
                      launcher=ProcessLauncher(tmp_path, "n1", devices=None), bootstrap_token="b", interval_s=0.2,
                      sample_interval_s=0.2)

    deadline = time.monotonic() + 60
    while not plane.reports("exited") and time.monotonic() < deadline:
        agent.step()
        time.sleep(0.02)

    assert plane.reports("exited")[0]["exit_code"] == 0
    assert sum(s["steps"] for s in plane.reports("sample")) == 50
    assert json.dumps(plane.reports("progress")[-1]["steps"]) == "50"


def test_a_jobs_env_never_sets_a_name_the_agent_sets(tmp_path: Path) -> None:
    """A job stored before the submit refused them (or written around it): its RANK and
    CUDA_VISIBLE_DEVICES lose to the agent's, and its QM_ROLE, which a plain gang's processes
    are not given, does not reach them as if the agent had said it. Its other names do."""
    env = {"RANK": "9", "CUDA_VISIBLE_DEVICES": "7", "QM_ROLE": "boss", "QM_PROGRESS_FILE": "/tmp/x", "LR": "0.1"}
    command = 'echo "$RANK|$CUDA_VISIBLE_DEVICES|${QM_ROLE-unset}|$QM_PROGRESS_FILE|$LR" > seen'
    member = ProcessMember(assignment(command, gpus=(3,), env=env), workdir=tmp_path, node_name="n", devices=None)

    assert wait_exit(member) == 0
    assert (tmp_path / "seen").read_text().strip() == f"0|3|unset|{tmp_path / 'rank0.progress.jsonl'}|0.1"


def test_a_jobs_processes_get_the_agents_environment_as_it_started_without_its_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Taken once when the launcher is made (decoding all of os.environ at every launch was ~5 %
    # of a busy agent's CPU): the agent never changes its environment afterwards.
    monkeypatch.setenv("QM_TEST_BEFORE", "agent started with it")
    monkeypatch.setenv("QM_AGENT_BOOTSTRAP_TOKEN", "registers-any-node-of-the-fleet")
    launcher = ProcessLauncher(tmp_path, "gpu-07", devices=None, cgroup_root="off")
    monkeypatch.setenv("QM_TEST_AFTER", "set once the agent ran")
    member = launcher.launch(assignment("env -0 > env.out"))
    assert wait_exit(member) == 0  # type: ignore[arg-type]
    env = dict(line.split("=", 1) for line in (tmp_path / "gpu-07" / "g7" / "env.out").read_bytes().decode()
               .split("\0") if "=" in line)
    assert env["QM_TEST_BEFORE"] == "agent started with it"
    assert "QM_TEST_AFTER" not in env
    assert "QM_AGENT_BOOTSTRAP_TOKEN" not in env
    assert env["QM_GENERATION"] == "7"
