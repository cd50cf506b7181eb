"""What the tests that run a real `qm-agent` process share: where the command is, and how
they wait for what it does."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

#: the venv's own agent command (an editable install: it runs this checkout's code)
QM_AGENT = str(Path(sys.executable).parent / "qm-agent")


def wait_for(condition: Callable[[], object], timeout: float, what: str, every: float = 0.05) -> None:
    """Until `condition()` is true, looked at every `every` seconds; an AssertionError naming
    `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")
