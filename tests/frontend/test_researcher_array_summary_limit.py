"""The array summary of the jobs list (`/jobs/?array_id=…`) says the array's task limit (Slurm's
`%N`): "Runs at most N tasks at a time.", and nothing of the kind for an array without one."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


def _summary(html: str) -> str:
    part = html[html.index('class="panel array-summary"'):]
    return part[:part.index("</section>")]


def test_the_array_summary_says_how_many_tasks_run_at_a_time(client_for, submit_as) -> None:
    limited = submit_as("alice", name="sweep", gpus=1, array="0-9", array_task_limit=3)
    free = submit_as("alice", name="free", gpus=1, array="0-1")
    client = client_for("alice")

    summary = _summary(client.get(f"/jobs/?array_id={limited.array_id}").content.decode())
    assert '<p id="array-summary-limit"' in summary
    assert "Runs at most 3 tasks at a time." in summary

    one = submit_as("alice", name="one", gpus=1, array="0-3", array_task_limit=1)
    assert "Runs at most 1 task at a time." in _summary(client.get(f"/jobs/?array_id={one.array_id}").content.decode())

    assert "array-summary-limit" not in _summary(client.get(f"/jobs/?array_id={free.array_id}").content.decode())
