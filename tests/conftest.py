"""Suite-wide fixtures. The Django tests run against the real PostgreSQL that `make test` starts."""

from __future__ import annotations

from typing import Any

from controlplane.agent.containment import CGROUP_V2_MOUNTS


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """Remove the empty run-cgroup parents the suite's real agents made (one per state
    directory, containment.py): a node keeps one for good, a test run made hundreds. A parent
    another worker still uses holds run cgroups and stays; one emptied between its runs is made
    again at its next launch."""
    for mount in CGROUP_V2_MOUNTS:
        try:
            parents = [p for p in mount.iterdir() if p.name.startswith("qm-agent-")]
        except OSError:
            continue
        for parent in parents:
            try:
                parent.rmdir()
            except OSError:
                pass
