"""An array's task totals (the jobs list filtered to the array, each task's page and its live
update, the API's `job-arrays/{id}/`) counted tasks by stored state, so a task its owner had
cancelled, or one stopping at its runtime limit, was counted under a "Preempting" badge while
the same task's own badge said "Stopping: cancelled". The totals now count by `state_label`,
in the state's colour, and the API's array summary says `state_labels` beside `states`."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job
from controlplane.services import transitions
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


@pytest.fixture
def array(submit_as) -> list[Job]:
    """Four tasks of 8 H100s, all running; then task 0 cancelled by its owner, task 1 stopping
    at its runtime limit, task 2 preempted; task 3 still running."""
    first = submit_as("alice", name="sweep", gpus=8, gpu_types=("H100-80GB",), array="0-3")
    run_cycle("test")
    tasks = list(Job.objects.filter(array_id=first.array_id).order_by("array_index"))
    assert [t.state for t in tasks] == [JobState.RUNNING] * 4
    assert transitions.cancel_job(tasks[0], "user:alice")
    for task, reason in ((tasks[1], transitions.RELEASE_RUNTIME_LIMIT), (tasks[2], transitions.RELEASE_PREEMPTED)):
        allocation = Allocation.objects.get(job=task, state=AllocationState.ACTIVE)
        assert transitions.signal_stop(allocation.pk, allocation.generation, reason=reason, grace_period_s=30,
                                       at=timezone.now(), actor="scheduler@epoch:1", message=f"{reason}.")
    assert Job.objects.filter(array_id=first.array_id, state=JobState.PREEMPTING).count() == 3
    return tasks


def _totals(html: str, marker: str) -> dict[str, int]:
    """Badge words → count, from the array totals after `marker`."""
    part = html[html.index(marker):]
    part = part[:part.index("</p>")]
    return {words: int(n) for words, n in re.findall(r'<span class="badge[^"]*"[^>]*>([^<]+)</span>\s*(\d+)', part)}


EXPECTED = {"Stopping: cancelled": 1, "Stopping: runtime limit": 1, "Preempting": 1, "Running": 1}


def test_the_array_summary_of_the_jobs_list_counts_by_label(client_for, array) -> None:
    html = client_for("alice").get(f"/jobs/?array_id={array[0].array_id}").content.decode()

    assert _totals(html, 'class="panel array-summary"') == EXPECTED
    # the badge keeps the state's colour: three stopping tasks, three preempting-coloured badges
    summary = html[html.index('class="panel array-summary"'):]
    summary = summary[:summary.index("</section>")]
    assert summary.count('data-state="preempting"') == 3


def test_each_task_page_and_its_live_update_count_by_label(client_for, array) -> None:
    client = client_for("alice")
    for task in array:
        page = client.get(f"/jobs/{task.pk}/").content.decode()
        live = client.get(f"/ui/jobs/{task.pk}.json").json()["html"]["job-status"]
        assert _totals(page, 'class="array-states"') == EXPECTED
        assert _totals(live, 'class="array-states"') == EXPECTED


def test_the_api_array_summary_says_the_labels_beside_the_states(client_for, array) -> None:
    body = client_for("alice").get(f"/api/v1/job-arrays/{array[0].array_id}/").json()

    assert body["states"] == {"preempting": 3, "running": 1}
    assert body["state_labels"] == {"stopping: cancelled": 1, "stopping: runtime limit": 1, "preempting": 1,
                                    "running": 1}


def test_a_stop_with_no_recorded_reason_is_counted_as_stopping(client_for, array) -> None:
    Allocation.objects.filter(job=array[0], state=AllocationState.RELEASING).update(release_reason="")
    body = client_for("alice").get(f"/api/v1/job-arrays/{array[0].array_id}/").json()

    assert body["state_labels"] == {"stopping": 1, "stopping: runtime limit": 1, "preempting": 1, "running": 1}
