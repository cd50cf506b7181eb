"""Found by the docs audit (5 Dec): README and docs/operations.md say `PORT` moves the demo
(`make demo` passes it on). `PORT=abc manage.py demo` ended in "ValueError: invalid literal for
int()" with a traceback, naming no variable, and `PORT=70000` got as far as binding. It is
refused at once, naming PORT and what it takes, as the settings refuse theirs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("port", ["abc", "0", "70000", "80.5"])
def test_a_port_that_is_no_tcp_port_is_refused_naming_port(port: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QM_") and k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="controlplane.settings", QM_LOG_FORMAT="console", PORT=port,
               DATABASE_URL=f"sqlite:///{tmp_path / 'demo.sqlite3'}")
    done = subprocess.run([sys.executable, "manage.py", "demo", "--no-stream"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"PORT must be a TCP port from 1 to 65535, got {port!r}" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "demo.sqlite3").exists()  # refused before migrating anything
