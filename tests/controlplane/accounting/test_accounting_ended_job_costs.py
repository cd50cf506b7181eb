"""Remembered costs of ended jobs (`job_costs.remember_ended_job_costs`, migration 0036): the
history's total reads a settled job's cents from one row instead of pricing its GPU rows again,
and a row is read only while what priced it still holds. Each test proves the row is read by
changing its cents behind the service's back, then that a price change, a node's new tier, a
requeue or an earlier `now` makes the total price the job again."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.db.models import F

from controlplane import tasks_accounting
from controlplane.choices import JobState
from controlplane.models import Job, Node
from controlplane.services import job_costs
from tests.controlplane import factories as f
from tests.controlplane.accounting.priced_runs import (
    NOW,
    add_member_exit,
    add_run,
    new_job,
    sum_of_jobs_costs,
)

pytestmark = [pytest.mark.django_db, pytest.mark.skipif("connection.vendor != 'postgresql'")]


def _remembered() -> dict[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id, cents FROM {job_costs.ENDED_JOB_COSTS}")
        return dict(cursor.fetchall())


def _tamper(job: Job, cents: int = 100) -> None:
    """Add `cents` to the job's remembered cost, as no service would: the total shows it only
    if it reads the row."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {job_costs.ENDED_JOB_COSTS} SET cents = cents + %s WHERE job_id = %s", [cents, job.pk])
        assert cursor.rowcount == 1


def _total() -> Decimal:
    return job_costs.jobs_total_cost(Job.objects.all(), NOW)


@pytest.fixture
def ended(priced: dict[str, Node]) -> dict[str, Job]:
    n = priced
    across = new_job()
    add_run(across, [(n["h1"], 3)], NOW - timedelta(days=4, seconds=13), NOW - timedelta(hours=5))
    gang = new_job(JobState.FAILED)
    run = add_run(gang, [(n["h1"], 8), (n["h2"], 8)], NOW - timedelta(days=2, hours=3), NOW - timedelta(hours=2))
    add_member_exit(run, n["h2"], NOW - timedelta(days=1, hours=1, seconds=3))
    spot = new_job(JobState.CANCELLED)
    add_run(spot, [(n["hs"], 4), (n["a1"], 8)], NOW - timedelta(days=9), NOW - timedelta(days=6, minutes=1))
    return {"across": across, "gang": gang, "spot": spot, "never_ran": new_job(JobState.CANCELLED)}


def test_a_settled_jobs_cost_is_remembered_and_read_from_its_row(ended: dict[str, Job]) -> None:
    before = _total()
    assert before == sum_of_jobs_costs(list(Job.objects.all())) > 0
    each = {job.pk: job_costs.run_costs(job.pk, NOW).total_usd for job in ended.values()}
    assert job_costs.remember_ended_job_costs(NOW) == 4
    assert {pk: Decimal(cents).scaleb(-2) for pk, cents in _remembered().items()} == each
    assert job_costs.jobs_costs(list(each), NOW) == each
    assert _total() == before
    # the history's total and its rows (the page's, the CSV's) read the row
    _tamper(ended["gang"])
    assert _total() == before + Decimal("1.00")
    assert job_costs.jobs_costs([ended["gang"].pk], NOW)[ended["gang"].pk] == each[ended["gang"].pk] + Decimal("1.00")
    # nothing left to remember: a second run writes nothing
    assert job_costs.remember_ended_job_costs(NOW) == 0


def test_jobs_that_may_still_cost_more_are_not_remembered(priced: dict[str, Node], ended: dict[str, Job]) -> None:
    n = priced
    running = new_job(JobState.RUNNING)
    add_run(running, [(n["a1"], 2)], NOW - timedelta(hours=3), None)
    stopping = new_job(JobState.CANCELLED)  # ended, its run still releasing
    add_run(stopping, [(n["h2"], 1)], NOW - timedelta(hours=3), None)
    released_later = new_job()  # released after the `now` asked about
    add_run(released_later, [(n["h1"], 1)], NOW - timedelta(hours=3), NOW + timedelta(minutes=5))
    requeued = new_job(JobState.PENDING)
    add_run(requeued, [(n["h1"], 1)], NOW - timedelta(hours=3), NOW - timedelta(hours=1))
    job_costs.remember_ended_job_costs(NOW)
    assert set(_remembered()) == {job.pk for job in ended.values()}
    assert _total() == sum_of_jobs_costs(list(Job.objects.all()))


def test_a_price_change_prices_remembered_jobs_again(priced: dict[str, Node], ended: dict[str, Job]) -> None:
    job_costs.remember_ended_job_costs(NOW)
    _tamper(ended["across"])
    # a correction back to before the job ran: its cost changes
    f.make_price_rate(priced["h1"].gpu_type, "5.0000", "on_demand", NOW - timedelta(days=5))
    assert _total() == sum_of_jobs_costs(list(Job.objects.all()))
    assert job_costs.remember_ended_job_costs(NOW) == 4  # every row was priced under the old rates
    assert _total() == sum_of_jobs_costs(list(Job.objects.all()))


def test_a_nodes_new_tier_prices_remembered_jobs_again_and_its_heartbeat_does_not(
        priced: dict[str, Node], ended: dict[str, Job]) -> None:
    job_costs.remember_ended_job_costs(NOW)
    _tamper(ended["spot"])
    tampered = _total()
    # what a node's heartbeats and a save() of all its fields write: a cost depends on none of it
    Node.objects.filter(pk=priced["hs"].pk).update(name="hs-renamed", last_heartbeat_at=NOW, unschedulable=True)
    node = Node.objects.get(pk=priced["hs"].pk)
    node.save()
    assert _total() == tampered
    Node.objects.filter(pk=priced["hs"].pk).update(capacity_tier="on_demand")  # was spot
    assert _total() == sum_of_jobs_costs(list(Job.objects.all())) != tampered


def test_a_requeued_job_is_priced_again_with_its_newadd_run(priced: dict[str, Node], ended: dict[str, Job]) -> None:
    job_costs.remember_ended_job_costs(NOW)
    across = ended["across"]
    _tamper(across)
    first = job_costs.jobs_costs([across.pk], NOW)[across.pk]
    # requeued (the count rises), run again, ended again: no new row written yet
    Job.objects.filter(pk=across.pk).update(requeue_count=F("requeue_count") + 1)
    add_run(across, [(priced["h2"], 2)], NOW - timedelta(hours=4), NOW - timedelta(hours=2))
    again = job_costs.jobs_costs([across.pk], NOW)[across.pk]
    assert again > first
    assert job_costs.jobs_total_cost(Job.objects.filter(pk=across.pk), NOW) == again
    assert job_costs.remember_ended_job_costs(NOW) == 1
    assert _remembered()[across.pk] == again * 100


def test_a_total_for_a_time_before_a_job_settled_prices_it(ended: dict[str, Job]) -> None:
    job_costs.remember_ended_job_costs(NOW)
    _tamper(ended["across"])
    earlier = NOW - timedelta(hours=6)  # before `across` was released
    assert job_costs.jobs_total_cost(Job.objects.filter(pk=ended["across"].pk), earlier) \
        == job_costs.jobs_costs([ended["across"].pk], earlier)[ended["across"].pk]


def test_a_deleted_job_takes_its_row_with_it(ended: dict[str, Job]) -> None:
    job_costs.remember_ended_job_costs(NOW)
    ended["never_ran"].delete()
    assert ended["never_ran"].pk not in _remembered() and len(_remembered()) == 3


def test_a_set_that_names_a_job_twice_counts_it_once(ended: dict[str, Job]) -> None:
    job_costs.remember_ended_job_costs(NOW)
    # a join on the job's allocations lists the gang once per run row
    doubled = Job.objects.filter(allocations__isnull=False, pk__in=[ended["gang"].pk, ended["across"].pk])
    assert doubled.count() >= 2
    assert job_costs.jobs_total_cost(doubled, NOW) == sum_of_jobs_costs([ended["gang"], ended["across"]])


def test_the_task_remembers_every_ended_job_in_batches(ended: dict[str, Job], monkeypatch) -> None:
    monkeypatch.setattr(tasks_accounting, "REMEMBER_BATCH", 3)
    assert tasks_accounting.remember_job_costs() == "remembered the cost of 4 ended jobs"
    assert set(_remembered()) == {job.pk for job in ended.values()}
