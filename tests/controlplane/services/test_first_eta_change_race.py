"""A waiting job changed (PATCH jobs/{id}/, `qm update`) while a cycle that read it before the
change is still to write its reasons and places: the change starts a new stay for the ETA record and clears
the place's first ETA (services/holds.update), and that cycle must not tell the new stay's
first ETA from the old request. Its place is written (position, ETA: the next cycle rewrites
them anyway) but its first ETA is left to the next cycle, which plans the job as it is now
(services/cycle._tell_first_etas: the job's row must still read as the snapshot read it). Nor
does it overwrite the change's "Changed … waiting for the next scheduling cycle" with a reason
planned from the old request (services/cycle._write_reasons: a compare-and-set on the reason
the snapshot read).

Real PostgreSQL; the change in progress runs on a second connection, holding its row locks."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

import scheduler_core as engine
from controlplane.models import Job, PendingPlace, Team
from controlplane.services import cycle, holds
from controlplane.services.snapshot import read_snapshot, scheduler_config
from tests.controlplane import factories as f
from tests.controlplane.eta_fixtures import one_node_team, submit
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread


@pytest.fixture
def one_node(transactional_db: Any) -> Team:
    return one_node_team()


def read_and_plan(now: datetime) -> tuple[Any, Any, int]:
    """A cycle's first half: the lease, the snapshot, the plan (not committed yet)."""
    lease = cycle.acquire_lease("w", now)
    assert lease is not None
    context = read_snapshot(now, lease.epoch)
    return engine.schedule(context.snapshot, scheduler_config()), context, lease.epoch


def commit(planned: tuple[Any, Any, int]) -> Any:
    plan, context, epoch = planned
    return cycle.commit_plan(plan, context, holder="w", epoch=epoch, plan_ms=0.0, started=time.perf_counter())


@pytest.fixture
def behind(one_node: Team) -> tuple[Job, datetime]:
    """A 2-hour job on the only node, and a job behind it: (that job, t0)."""
    t0 = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    submit(one_node, "first", 2 * 3600, t0 - timedelta(seconds=10))
    assert cycle.run_cycle("w", now=t0).binds == 1
    return submit(one_node, "behind", 3600, t0 + timedelta(seconds=30)), t0


def assert_told_by_the_next_cycle(job: Job, at: datetime) -> None:
    place = PendingPlace.objects.get(job=job)
    assert (place.first_eta, place.first_eta_at) == (None, None), "a first ETA told from the request before the change"
    cycle.run_cycle("w", now=at)
    place.refresh_from_db()
    assert place.first_eta is not None and place.first_eta_at == at


@pytest.mark.parametrize("placed", [False, True], ids=["new-job", "job-with-a-first-eta"])
def test_a_change_committed_after_the_read_gets_its_first_eta_from_the_next_cycle(behind, placed) -> None:
    job, t0 = behind
    if placed:
        cycle.run_cycle("w", now=t0 + timedelta(seconds=60))
        assert PendingPlace.objects.get(job=job).first_eta is not None
    planned = read_and_plan(t0 + timedelta(seconds=90))
    assert holds.update(f.make_user("boss", superuser=True), job.pk, {"runtime_limit_s": 1800}).changed

    commit(planned)

    assert PendingPlace.objects.get(job=job).queue_position is not None  # ranked, as the cycle read it
    changed = Job.objects.get(pk=job.pk)  # the change's words stand: the cycle's reason was for the old request
    assert (changed.pending_code, changed.pending_message) == (
        "Changed", "Changed by boss; waiting for the next scheduling cycle to judge it as it is now.")
    assert_told_by_the_next_cycle(job, t0 + timedelta(seconds=120))
    assert Job.objects.get(pk=job.pk).pending_code != "Changed"  # worded anew by that cycle


@pytest.mark.parametrize("placed", [False, True], ids=["new-job", "job-with-a-first-eta"])
def test_a_cycle_writing_while_a_change_is_in_progress_waits_for_it_and_tells_no_first_eta(behind, placed) -> None:
    """The change holds the job's row and its place (a real holds.update in an open
    transaction): the cycle's commit waits for it (no deadlock), then leaves the first ETA
    untold, since the job no longer reads as the cycle read it."""
    job, t0 = behind
    if placed:
        cycle.run_cycle("w", now=t0 + timedelta(seconds=60))
    boss = f.make_user("boss", superuser=True)
    planned = read_and_plan(t0 + timedelta(seconds=90))
    changed, go_on = threading.Event(), threading.Event()

    def change() -> Any:
        with transaction.atomic():
            outcome = holds.update(boss, job.pk, {"gpus": 4})
            changed.set()
            assert go_on.wait(30)
        return outcome.changed

    changer, change_out = in_thread(change)
    assert changed.wait(30)
    committer, commit_out = in_thread(lambda: commit(planned))
    assert blocked_on_a_lock()  # the cycle's commit waits for the change's row locks
    go_on.set()
    changer.join(30)
    committer.join(30)

    assert change_out == {"result": True} and "error" not in commit_out, (change_out, commit_out)
    assert Job.objects.get(pk=job.pk).pending_code == "Changed"
    assert_told_by_the_next_cycle(job, t0 + timedelta(seconds=120))


def test_an_unchanged_job_is_told_its_first_eta_by_the_cycle_that_ranks_it(behind) -> None:
    job, t0 = behind
    commit(read_and_plan(t0 + timedelta(seconds=60)))
    place = PendingPlace.objects.get(job=job)
    assert (place.first_eta, place.first_eta_at) == (t0 + timedelta(hours=2), t0 + timedelta(seconds=60))
