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


def test_the_limit_is_said_once_not_on_every_task_row(client_for, submit_as) -> None:
    """Every task's row said "array runs at most 3 at a time" under the summary that says it
    (until 7 Dec): the rows say it no more, on the array's list or the whole list; a task held
    back by it says so in its own reason (JobArrayTaskLimit), the row that needs it."""
    limited = submit_as("alice", name="sweep", gpus=1, array="0-9", array_task_limit=3)
    client = client_for("alice")
    html = client.get(f"/jobs/?array_id={limited.array_id}").content.decode()
    assert html.count("at most 3") == 1 and "Runs at most 3 tasks at a time." in _summary(html)
    assert "at most 3" not in client.get("/jobs/").content.decode()
    live = client.get("/ui/jobs.json", {"after": "0"}).json()
    assert live["rows"] and not any("at most 3" in row for row in live["rows"])
