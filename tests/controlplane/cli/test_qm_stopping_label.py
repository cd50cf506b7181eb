"""`qm list` and `qm status JOB` said `preempting` for a job its owner had cancelled or that had
reached its runtime limit (the stored state, whatever stops a job); they now say the API's
`state_label`: `stopping: cancelled`, `stopping: runtime limit`, `preempting`."""

from __future__ import annotations

import pytest

from tests.controlplane.stopping_jobs import STOPS, make_stopping_jobs

pytestmark = pytest.mark.slow


def _state_cells(out: str) -> dict[str, str]:
    lines = out.splitlines()
    start, end = lines[0].index("STATE"), lines[0].index("GPUS")
    return {line.split()[1]: line[start:end].strip() for line in lines[1:] if line.split()[:1] and
            line.split()[0].isdigit()}


def test_list_and_status_say_why_a_job_is_stopping(alice_qm, fleet) -> None:
    jobs = make_stopping_jobs(fleet)

    listed = alice_qm("list")
    assert listed.code == 0, listed.err
    cells = _state_cells(listed.out)
    for name, (_, label) in STOPS.items():
        assert cells[name] == label
    assert cells["running"] == "running"

    status = alice_qm("status", str(jobs["cancelled"].pk))
    assert status.code == 0, status.err
    state_line = next(line for line in status.out.splitlines() if line.strip().startswith("state"))
    assert state_line.split(None, 1)[1].strip() == "stopping: cancelled"
    timed_out = alice_qm("status", str(jobs["timed-out"].pk))
    assert "stopping: runtime limit" in timed_out.out
