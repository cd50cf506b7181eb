"""`qm status` of a one-GPU job said "shape: 1 GPUs" and `qm submit` "1 GPU(s)"; they now count
as the event messages do (the engine's `counted`): "1 GPU", "2 GPUs"."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_submit_and_status_count_one_gpu_and_two(alice_qm) -> None:
    one = alice_qm("submit", "--name", "one", "--gpus", "1", "--", "true")
    assert one.code == 0, one.err
    assert "): 1 GPU, priority" in one.out
    job_id = one.out.split()[2]
    status = alice_qm("status", job_id)
    assert status.code == 0, status.err
    shape = next(line for line in status.out.splitlines() if line.startswith("shape:"))
    assert shape.split(None, 1)[1] == "1 GPU"

    two = alice_qm("submit", "--name", "two", "--gpus", "2", "--array", "0-1", "--", "true")
    assert two.code == 0, two.err
    assert "2 tasks of 2 GPUs," in two.out
