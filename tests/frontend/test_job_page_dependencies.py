"""The job page says what a job runs after ("Runs after: job 12 succeeds (now running)", with
links) and which jobs wait on it; a job cancelled because its dependency can never be met says
why. The live refresh (`/ui/jobs/<id>.json`) says the same."""

from __future__ import annotations

import pytest
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, Job
from controlplane.services import transitions
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def _pages(client, job: Job) -> list[str]:
    return [client.get(f"/jobs/{job.pk}/").content.decode(),
            client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]]


def test_a_dependent_job_says_what_it_runs_after_and_the_upstream_who_waits(client_for, submit_as):
    pre = submit_as("alice", name="preprocess", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    train = submit_as("alice", name="train", gpus=8, dependencies=({"job": pre.pk},))
    client = client_for("alice")

    for page in _pages(client, train):
        assert (f'<strong>Runs after:</strong> <a href="/jobs/{pre.pk}/">job {pre.pk}</a> (preprocess) succeeds '
                '<span class="muted">(now running)</span>') in page
    for page in _pages(client, pre):
        assert (f'<strong>Jobs waiting on this one:</strong> <a href="/jobs/{train.pk}/">job {train.pk}</a> '
                "(train, afterok, pending)") in page


def test_a_job_cancelled_by_its_dependency_says_why(client_for, submit_as):
    pre = submit_as("alice", name="preprocess", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    train = submit_as("alice", name="train", gpus=8, dependencies=({"job": pre.pk},))
    allocation = Allocation.objects.get(job=pre, state=AllocationState.ACTIVE)
    transitions.complete_release(allocation.pk, exit_code=3, at=timezone.now(), actor="agent")
    assert Job.objects.get(pk=train.pk).state == JobState.CANCELLED

    for page in _pages(client_for("alice"), train):
        assert "<code>DependencyNeverSatisfied</code>" in page
        assert f"Job {pre.pk} failed (exit 3): this job was to run only after it succeeded (afterok)" in page
        assert f'job {pre.pk}</a> (preprocess) succeeds <span class="muted">(now failed)</span>' in page


def test_a_job_without_dependencies_shows_neither_line(client_for, submit_as):
    job = submit_as("alice", name="alone", gpus=8)
    for page in _pages(client_for("alice"), job):
        assert "Runs after:" not in page and "Jobs waiting on this one:" not in page


def test_another_teams_job_is_named_by_its_id_only(client_for, submit_as):
    """An admin may tie a job of one team to another team's: the page names that job by its id,
    without its name or a link (its page would be a 404 for them anyway)."""
    theirs = submit_as("bob", name="language-secret", gpus=8)
    ours = submit_as("admin", name="vision-eval", gpus=8, team="vision", dependencies=({"job": theirs.pk},))

    for page in _pages(client_for("alice"), ours):
        assert f"job {theirs.pk} (another team's) succeeds" in page
        assert "language-secret" not in page and f'href="/jobs/{theirs.pk}/"' not in page
    for page in _pages(client_for("bob"), theirs):
        assert f"job {ours.pk} (another team's, afterok, pending)" in page and "vision-eval" not in page
    for page in _pages(client_for("admin"), ours):
        assert f'<a href="/jobs/{theirs.pk}/">job {theirs.pk}</a> (language-secret)' in page
