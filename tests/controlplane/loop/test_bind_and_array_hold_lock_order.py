"""A cycle binding two waiting jobs while an admin holds both (an array's `qm hold`), on
PostgreSQL with three connections (tests/controlplane/lock_waits.py).

`holds.hold_array` locks the jobs' rows in id order "so a cycle binding one meanwhile either wins
or finds it held"; the cycle's bind (transitions.bind_jobs) locked them in whatever order
PostgreSQL read them: a job row updated since (its tuple now later in the table) came after one
with a higher id, so each took one row and waited for the other, and PostgreSQL aborted one of
them (the cycle's whole commit, or the hold: a 500). Now the bind locks them in id order too."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone

from controlplane.choices import JobHold, JobState
from controlplane.models import Job
from controlplane.services import holds, reconcile, transitions
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet, build_fleet
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread


@pytest.fixture
def committed_fleet(transactional_db: Any) -> Fleet:
    return build_fleet()


def _table_compacted() -> None:
    """Rewrite the job table without the dead rows earlier tests of this worker left (rolled
    back inserts): PostgreSQL reuses a freed slot on a page for a row's new version, which then
    reads before the other job's row, not after it, and the test's order check failed in a
    parallel batch (7 Dec). VACUUM runs outside a transaction: these tests' database commits."""
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM FULL {Job._meta.db_table}")


def _planned_as_the_tiny_table_it_is() -> None:
    """Fresh statistics, so every connection reads the two rows by a scan of the table, in the
    order they lie there. With the statistics an earlier test of the same worker's database left
    (many rows since deleted), PostgreSQL read them by the id index, in id order, and the first
    test's check of the table's order failed in a full run (5 Dec)."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Job._meta.db_table}")


def test_a_bind_and_an_array_hold_of_the_same_jobs_take_their_rows_in_one_order(committed_fleet: Fleet) -> None:
    fleet = committed_fleet
    node = fleet.nodes[1]
    _table_compacted()
    low = f.make_job(fleet.ml, fleet.research, name="task-1", gpus=1)
    high = f.make_job(fleet.ml, fleet.research, name="task-2", gpus=1)
    Job.objects.filter(pk=low.pk).update(name="task-1 (renamed)")  # its row now later in the table
    _planned_as_the_tiny_table_it_is()
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {Job._meta.db_table} WHERE id IN (%s, %s)", [low.pk, high.pk])
        assert [r[0] for r in cursor.fetchall()] == [high.pk, low.pk], "the table does not read as this test needs"

    def bind_both() -> tuple[int, int]:
        with transaction.atomic():
            lease = reconcile.lock_scheduler_lease()
            return transitions.bind_jobs(
                [transitions.BindRequest(job_id=job.pk, gpus=[transitions.GpuSet(node_id=node.pk, gpu_indices=[i])],
                                         borrowed=False) for i, job in enumerate((low, high))],
                lease=lease, at=timezone.now(), actor="scheduler@epoch:1", node_names={node.pk: node.name})

    with transaction.atomic():
        # Someone holds the lower job's row for a moment (a PATCH of it): the hold waits for it
        # first, then the bind, each having locked what it took before.
        Job.objects.select_for_update(no_key=True).get(pk=low.pk)
        holding, held = in_thread(lambda: holds.hold_array(fleet.users["admin"], [low.pk, high.pk],
                                                          release_them=False, reason="maintenance"))
        assert blocked_on_a_lock(at_least=1)
        binding, bound = in_thread(bind_both)
        assert blocked_on_a_lock(at_least=2)
    holding.join(30)
    binding.join(30)

    assert "error" not in held, held.get("error")
    assert "error" not in bound, bound.get("error")
    states = dict(Job.objects.filter(pk__in=(low.pk, high.pk)).values_list("pk", "state"))
    holds_ = dict(Job.objects.filter(pk__in=(low.pk, high.pk)).values_list("pk", "hold"))
    for pk in (low.pk, high.pk):  # each either held (and waiting) or bound, never both
        assert (states[pk], holds_[pk]) in ((JobState.PENDING, JobHold.ADMIN), (JobState.RUNNING, JobHold.NONE))


def test_a_cycle_rewording_two_waiting_jobs_and_an_array_hold_of_both_take_their_rows_in_one_order(
        committed_fleet: Fleet) -> None:
    """The same for the cycle's store of waiting jobs' reasons (cycle._write_reasons, one UPDATE
    of the jobs whose reason changed): it locks their rows in id order first."""
    from controlplane.services import cycle

    fleet = committed_fleet
    _table_compacted()
    low = f.make_job(fleet.ml, fleet.research, name="task-1", gpus=1)
    high = f.make_job(fleet.ml, fleet.research, name="task-2", gpus=1)
    Job.objects.filter(pk=low.pk).update(name="task-1 (renamed)")  # its row now later in the table
    _planned_as_the_tiny_table_it_is()
    read = dict(Job.objects.filter(pk__in=(low.pk, high.pk)).values_list(
        "pk", "pending_code").order_by("pk"))
    words = {pk: Job.objects.filter(pk=pk).values_list("pending_words", "would_start_if_words").get()
             for pk in (low.pk, high.pk)}

    def reword_both() -> set[int]:
        with transaction.atomic():
            return cycle._write_reasons([
                (pk, "InsufficientGpus", "No room", "", True, read[pk], words[pk][0], words[pk][1])
                for pk in (high.pk, low.pk)])

    with transaction.atomic():
        Job.objects.select_for_update(no_key=True).get(pk=low.pk)
        holding, held = in_thread(lambda: holds.hold_array(fleet.users["admin"], [low.pk, high.pk],
                                                          release_them=False, reason="maintenance"))
        assert blocked_on_a_lock(at_least=1)
        rewording, reworded = in_thread(reword_both)
        assert blocked_on_a_lock(at_least=2)
    holding.join(30)
    rewording.join(30)

    assert "error" not in held, held.get("error")
    assert "error" not in reworded, reworded.get("error")
    assert set(Job.objects.filter(pk__in=(low.pk, high.pk)).values_list("hold", flat=True)) == {JobHold.ADMIN}
