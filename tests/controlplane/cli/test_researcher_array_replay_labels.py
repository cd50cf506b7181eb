"""`qm submit --array … --idempotency-key K` run again says how the array's tasks stand now:
it counted them by stored state, so a task its owner had cancelled and that was still stopping
read "1 preempting" beside the task's own `stopping: cancelled` in `qm list`. It now counts by
the API's `state_labels`."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from controlplane.models import Job
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.slow


def test_a_replayed_array_counts_a_cancelled_stopping_task_as_stopping_cancelled(alice_qm) -> None:
    args = ("submit", "--name", "sweep", "--gpus", "1", "--array", "0-3", "--idempotency-key", "sweep-1")
    assert alice_qm(*args).code == 0
    run_cycle("test")
    tasks = list(Job.objects.order_by("array_index"))
    assert [t.state for t in tasks] == [JobState.RUNNING] * 4
    assert alice_qm("cancel", str(tasks[0].pk)).code == 0
    assert Job.objects.get(pk=tasks[0].pk).state == JobState.PREEMPTING  # its processes get their grace

    again = alice_qm(*args)

    assert again.code == 0, again.err
    assert "now 3 running, 1 stopping: cancelled." in again.out, again.out
    assert "preempting" not in again.out
