"""qm-agent refuses a bad option at once, naming it (exit 2), instead of misbehaving.

Found running qm-agent against the demo: `--batch 0` crashed the simulating thread with
"ValueError: range() arg 3 must not be zero" and exited 0; `--simulate 0` (or -3) simulated no
node and exited 0; `--server localhost:8814` (no scheme) was retried forever, logged as
"control plane unreachable … No connection adapters were found".
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from controlplane.agent.main import parse_args
from tests.controlplane.agent.real_agent import CHECKOUT, QM_AGENT


@pytest.mark.parametrize(("args", "named"), [
    (["--server", "localhost:8814", "--simulate", "2"], "--server"),
    (["--server", "ftp://qm.example.org", "--simulate", "2"], "--server"),
    (["--simulate", "0"], "--simulate"),
    (["--simulate", "-3"], "--simulate"),
    (["--simulate", "2", "--batch", "0"], "--batch"),
    (["--simulate", "2", "--interval", "0"], "--interval"),
    (["--simulate", "2", "--interval", "nan"], "--interval"),
    (["--simulate", "2", "--sample-interval", "-1"], "--sample-interval"),
    (["--simulate", "2", "--stop-grace", "-1"], "--stop-grace"),
    (["--gpus", "0", "--gpu-type", "H100-80GB"], "--gpus"),
    (["--gpus", "eight"], "--gpus"),
])
def test_a_bad_option_exits_2_naming_it(tmp_path: Path, args: list[str], named: str) -> None:
    server = [] if "--server" in args else ["--server", "http://127.0.0.1:9"]
    done = subprocess.run([QM_AGENT, *server, "--state-dir", str(tmp_path), *args],
                          # this checkout's code first: the venv's `qm-agent` may be another's
                          env={"PATH": "/usr/bin:/bin", "QM_AGENT_BOOTSTRAP_TOKEN": "x", "PYTHONPATH": CHECKOUT},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"argument {named}" in done.stderr


def test_good_options_parse_as_before() -> None:
    args = parse_args(["--server", "https://qm.example.org", "--simulate", "16", "--gpus", "8", "--interval", "2.5",
                       "--stop-grace", "0", "--limit-grace", "0", "--batch", "1", "--threads", "0"])
    assert (args.server, args.simulate, args.gpus, args.interval, args.stop_grace, args.batch) == (
        "https://qm.example.org", 16, 8, 2.5, 0.0, 1)
    assert parse_args([]).server == "http://127.0.0.1:8000"
