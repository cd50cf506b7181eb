"""What the tests that run a real `qm-agent` process share: where the command is, and how
they wait for what it does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

#: the venv's own agent command (an editable install: it runs this checkout's code)
QM_AGENT = str(Path(sys.executable).parent / "qm-agent")
#: this checkout, first on the agent's path: the venv's editable install may be another
#: checkout's (a clone tested with the main one's venv), and its code is not what is tested
CHECKOUT = str(Path(__file__).resolve().parents[3])


def wait_for(condition: Callable[[], object], timeout: float, what: str, every: float = 0.05) -> None:
    """Until `condition()` is true, looked at every `every` seconds; an AssertionError naming
    `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def start_agent(server: str, state_dir: Path, name: str, log: IO[bytes], *, gpus: int = 2,
                options: Sequence[str] = ("--no-wake",), cgroup: Path | None = None) -> subprocess.Popen[bytes]:
    """A real `qm-agent` process for node `name`: `gpus` H100-80GB GPUs in pool h100 on leaf-1
    and spine-1, a heartbeat every 0.5 s, its log (console format) to `log`, in a session of its
    own; registered with the loop fixtures' bootstrap secret. With `cgroup` (a cgroup v2
    directory), it runs in that cgroup from its first instruction on, as systemd starts a
    service in the unit's cgroup."""
    from controlplane.agent.containment import joined_argv
    from tests.controlplane.loop_fixtures import BOOTSTRAP

    argv = [QM_AGENT, "--server", server, "--name", name, "--gpus", str(gpus), "--gpu-type", "H100-80GB",
            "--pool", "h100", "--leaf-switch", "leaf-1", "--spine", "spine-1", "--state-dir", str(state_dir),
            "--interval", "0.5", "--log-format", "console", *options]
    return subprocess.Popen(
        argv if cgroup is None else joined_argv(cgroup, argv),
        env={**os.environ, "QM_AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP,
             "PYTHONPATH": os.pathsep.join(filter(None, [CHECKOUT, os.environ.get("PYTHONPATH")]))}, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def stop_agent(agent: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as an operator stops it; SIGKILL if it has not exited 20 s later."""
    if agent.poll() is not None:
        return
    agent.send_signal(signal.SIGTERM)
    try:
        agent.wait(timeout=20)
    except subprocess.TimeoutExpired:
        agent.kill()
        agent.wait()
