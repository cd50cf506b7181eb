"""A change of a waiting job's dependencies (PATCH jobs/{id}/) at the same moment as its
upstream job's end, or as another change: real row locks on two connections. The change locks
its upstream jobs before the job itself, the order a transition takes them in, so neither
deadlocks; changes of dependencies run one at a time, so two of them never close a cycle."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from controlplane.choices import DependencyCondition, JobState
from controlplane.models import Job, JobDependency
from controlplane.services import dependencies, holds
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import build_fleet, client_for
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread

J = "/api/v1/jobs/"


@pytest.fixture
def committed_fleet(transactional_db: Any, settings: Any) -> Any:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return build_fleet()


def _patch(fleet: Any, job: Job, deps: Any) -> Callable[[], Any]:
    def work() -> Any:
        r = client_for(fleet, "owner").patch(f"{J}{job.pk}/", {"dependencies": deps}, format="json")
        return r.status_code, r.json()
    return work


def test_a_change_while_the_upstream_fails_waits_for_it_and_is_refused_without_deadlock(committed_fleet) -> None:
    """The upstream's end locks it first and then cancels the dependent (afterok can never be
    met): the change, which had only to lock the upstream FOR SHARE before the dependent, waits
    for that end and then finds the job cancelled (409). Locking the dependent first would have
    deadlocked the two (PostgreSQL would abort one, a 503 or a failed cycle)."""
    fleet = committed_fleet
    up = f.make_job(fleet.ml, state=JobState.RUNNING, started_at=timezone.now())
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"])
    JobDependency.objects.create(job=job, upstream=up, condition=DependencyCondition.AFTER_OK)
    upstream_locked, go_on, ended = threading.Event(), threading.Event(), threading.Event()

    def end() -> None:
        with transaction.atomic():
            Job.objects.filter(pk=up.pk).update(state=JobState.FAILED, exit_code=1, finished_at=timezone.now())
            upstream_locked.set()
            assert go_on.wait(30)
            dependencies.ended([dependencies.Change(up.pk, JobState.FAILED, 1)], at=timezone.now(), actor="agent")
        ended.set()

    ender, ender_out = in_thread(end)
    assert upstream_locked.wait(30)
    changer, changed = in_thread(_patch(fleet, job, [{"job": up.pk, "condition": "afterany"}]))
    assert blocked_on_a_lock()  # the change waits for the upstream's row
    go_on.set()
    ender.join(30)
    changer.join(30)

    assert "error" not in ender_out and ended.is_set(), ender_out
    assert "error" not in changed, changed
    status, body = changed["result"]
    assert status == 409, body
    assert body["errors"] == {"dependencies": [f"job {job.pk} has already ended (cancelled)"]}
    assert Job.objects.get(pk=job.pk).pending_code == dependencies.NEVER_SATISFIED
    assert list(JobDependency.objects.filter(job=job).values_list("condition", flat=True)) == ["afterok"]


def test_an_upstream_ending_while_a_change_holds_it_finds_the_new_dependency(committed_fleet) -> None:
    """The change first: the upstream's end waits for it, then settles the new dependency
    (afterany on a failure: met), never the one it replaced (afterok: it would have cancelled)."""
    fleet = committed_fleet
    owner = fleet.users["owner"]
    up = f.make_job(fleet.ml, state=JobState.RUNNING, started_at=timezone.now())
    job = f.make_job(fleet.ml, submitter=owner)
    JobDependency.objects.create(job=job, upstream=up, condition=DependencyCondition.AFTER_OK)
    changed, go_on = threading.Event(), threading.Event()

    def change() -> Any:
        with transaction.atomic():
            outcome = holds.update(owner, job.pk, {"dependencies": [{"job": up.pk, "condition": "afterany"}]})
            changed.set()
            assert go_on.wait(30)
        return outcome

    changer, change_out = in_thread(change)
    assert changed.wait(30)

    def end() -> None:
        with transaction.atomic():
            Job.objects.filter(pk=up.pk).update(state=JobState.FAILED, exit_code=1, finished_at=timezone.now())
            dependencies.ended([dependencies.Change(up.pk, JobState.FAILED, 1)], at=timezone.now(), actor="agent")

    ender, end_out = in_thread(end)
    assert blocked_on_a_lock()  # the end waits for the change's lock on the upstream row
    go_on.set()
    changer.join(30)
    ender.join(30)

    assert "error" not in change_out and "error" not in end_out, (change_out, end_out)
    job.refresh_from_db()
    assert job.state == JobState.PENDING
    dep = JobDependency.objects.get(job=job)
    assert (dep.condition, dep.satisfied_at is not None) == ("afterany", True)


def test_two_changes_that_would_close_a_cycle_run_one_after_the_other_and_the_second_is_refused(
    committed_fleet,
) -> None:
    fleet = committed_fleet
    owner = fleet.users["owner"]
    a = f.make_job(fleet.ml, name="a", submitter=owner)
    b = f.make_job(fleet.ml, name="b", submitter=owner)
    first_done, go_on = threading.Event(), threading.Event()

    def first() -> Any:
        with transaction.atomic():
            outcome = holds.update(owner, a.pk, {"dependencies": [{"job": b.pk}]})
            first_done.set()
            assert go_on.wait(30)
        return outcome

    one, one_out = in_thread(first)
    assert first_done.wait(30)
    two, two_out = in_thread(_patch(fleet, b, [{"job": a.pk}]))
    assert blocked_on_a_lock()  # the second change waits for the first to commit
    go_on.set()
    one.join(30)
    two.join(30)

    assert "error" not in one_out and "error" not in two_out, (one_out, two_out)
    status, body = two_out["result"]
    assert status == 400, body
    assert body["errors"] == {"dependencies.0.job": [
        f"job {a.pk} waits on this job (job {b.pk}): a cycle, neither could ever start"]}
    assert list(JobDependency.objects.values_list("job_id", "upstream_id")) == [(a.pk, b.pk)]
