"""Each node name the tests run real job processes under belongs to one test file.

A run's processes carry its node's name and generation in their environment (QM_AGENT_NODE,
QM_GENERATION), and a member's end, an agent's sweep at its start and the reaper after it kill
every process on the host that carries both (members.marked_processes: what left the run's
process groups must not outlive it). On a node the name is the host's own; in the test suite
three workers share one host, every transactional test's first run is g1, and most process
tests use generation 7. `make test` keeps each file's tests on one worker (--dist loadfile), so
two files that share a name can kill each other's jobs. On 7 Dec the first test of
test_agent_dropped_line_survives_restart.py timed out waiting for its job's output beside
test_agent_restart_ships_unsent_output.py, both on gpu-inflight, g1.

Read from the source: the names given to ProcessLauncher, ProcessMember(node_name=...),
start_agent (a real `qm-agent`), test_agent_ships_logs.process_agent, and NodeInventory in a
file that launches real processes."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]

_NAME = r"""f?["']([^"'{}]+)["']"""
GIVEN = [
    re.compile(r"ProcessLauncher\(\s*[^,()]+(?:\([^()]*\))?[^,()]*,\s*" + _NAME),
    re.compile(r"ProcessMember\((?:(?!ProcessMember\().){0,400}?node_name\s*=\s*" + _NAME, re.S),
    re.compile(r"start_agent\(\s*[^,]+,\s*[^,]+,\s*" + _NAME),
    re.compile(r"process_agent\([^)]*\bname\s*=\s*" + _NAME),
    re.compile(r"NodeInventory\(\s*name\s*=\s*" + _NAME),
    # an agent whose state directory is named for its node (test_agent_dropped_line_survives_restart.py)
    re.compile(r"_agent\(\s*[^,]+,\s*tmp_path\s*/\s*" + _NAME),
]
REAL = re.compile(r"ProcessLauncher\(|ProcessMember\(|start_agent\(|process_agent\(")


def names_by_file() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(TESTS.rglob("*.py")):
        text = path.read_text()
        if path.name == Path(__file__).name or not REAL.search(text):
            continue
        names = {match.group(1) for pattern in GIVEN for match in pattern.finditer(text)}
        if "process_agent(" in text and re.search(r"process_agent\([^)]*\)", text):
            # its default name, for a call that gives none
            if any("name=" not in call for call in re.findall(r"process_agent\(([^)]*)\)", text)
                   if not call.startswith("server")):
                names.add("gpu-logs")
        if names:
            found[str(path.relative_to(TESTS.parent))] = names
    return found


def test_the_scan_sees_the_agent_tests_names() -> None:
    found = names_by_file()
    assert "gpu-cap" in found["tests/controlplane/agent/test_agent_output_cap.py"]
    assert "gpu-inflight" in found["tests/controlplane/agent/test_agent_dropped_line_survives_restart.py"]
    assert "gpu-logs" in found["tests/controlplane/agent/test_agent_ships_logs.py"]
    assert len(found) >= 20, sorted(found)


def test_no_node_name_with_real_processes_is_in_two_files() -> None:
    files_of: dict[str, list[str]] = defaultdict(list)
    for path, names in names_by_file().items():
        for name in names:
            files_of[name].append(path)
    shared = {name: paths for name, paths in files_of.items() if len(paths) > 1}
    assert not shared, f"node names two files run real processes under (give each file its own): {shared}"
