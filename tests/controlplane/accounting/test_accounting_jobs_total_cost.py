"""`job_costs.jobs_total_cost`: what a set of jobs cost, added up in one query, is the sum of
what `job_costs.jobs_costs` charges each of them (the history CSV's `cost_usd` cells and TOTAL
row), to the cent: across price changes, gang members that left early, requeued jobs, runs still
held, time before a first rate, odd microseconds and exact half cents."""

from __future__ import annotations

import random
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.choices import JobState
from controlplane.models import Event, Job
from controlplane.services import job_costs
from tests.controlplane import factories as f
from tests.controlplane.accounting.priced_runs import (
    NOW,
    add_member_exit,
    add_run,
    new_job,
    sum_of_jobs_costs,
)

pytestmark = pytest.mark.django_db


def test_the_total_is_the_sum_of_every_jobs_cost_across_every_kind_ofadd_run(priced) -> None:
    n = priced
    jobs = []
    # across both price changes, odd microseconds
    across = new_job()
    add_run(across, [(n["h1"], 3)], NOW - timedelta(days=4, seconds=13, microseconds=7), NOW - timedelta(hours=5))
    jobs.append(across)
    # requeued: two runs on two GPU types
    requeued = new_job()
    add_run(requeued, [(n["h2"], 2)], NOW - timedelta(days=2), NOW - timedelta(days=1, hours=20))
    add_run(requeued, [(n["a1"], 8), (n["h1"], 1)], NOW - timedelta(days=1, hours=19), NOW - timedelta(hours=1))
    jobs.append(requeued)
    # a gang whose member on h2 left early: that node's GPUs stop costing at its exit
    gang = new_job()
    run = add_run(gang, [(n["h1"], 8), (n["h2"], 8)], NOW - timedelta(days=2, hours=3), NOW - timedelta(hours=2))
    add_member_exit(run, n["h2"], NOW - timedelta(days=1, hours=1, seconds=3))
    jobs.append(gang)
    # before spot's first rate (free) and after; and a node of a tier with no rate (free)
    spot = new_job()
    add_run(spot, [(n["hs"], 4), (n["a2"], 8)], NOW - timedelta(days=9), NOW - timedelta(days=6, minutes=1))
    jobs.append(spot)
    # still held: priced to NOW; and a job that never ran
    running = new_job(JobState.RUNNING)
    add_run(running, [(n["a1"], 5)], NOW - timedelta(hours=7, microseconds=333), None)
    jobs.append(running)
    jobs.append(new_job(JobState.CANCELLED))
    # bound after NOW: nothing yet, as jobs_costs says
    add_run(new_job(), [(n["h1"], 1)], NOW + timedelta(minutes=1), NOW + timedelta(minutes=9))

    each = job_costs.jobs_costs([job.pk for job in jobs], NOW)
    assert each == {job.pk: job_costs.run_costs(job.pk, NOW).total_usd for job in jobs}
    assert all(cost > 0 for job, cost in each.items() if job != jobs[-1].pk) and each[jobs[-1].pk] == 0
    # one by one, then all of them (with the job bound later), equal to the cent
    for job in jobs:
        assert job_costs.jobs_total_cost(Job.objects.filter(pk=job.pk), NOW) == each[job.pk], job.name
    everything = Job.objects.all()
    assert job_costs.jobs_total_cost(everything, NOW) == sum_of_jobs_costs(list(everything))
    # the gang's exit counts: without it the job would cost more
    full = job_costs.jobs_total_cost(Job.objects.filter(pk=gang.pk), NOW)
    Event.objects.filter(reason="MemberExited").delete()
    assert job_costs.jobs_total_cost(Job.objects.filter(pk=gang.pk), NOW) == job_costs.jobs_costs([gang.pk], NOW)[
        gang.pk] > full


def test_a_job_exactly_on_half_a_cent_rounds_half_to_even_both_ways(priced) -> None:
    """$1/GPU-hour: 18 s is $0.005 exactly (→ 0.00), 54 s $0.015 (→ 0.02). Made of pieces whose
    cost is no finite decimal (1 s and 17 s, 1/3600 of a dollar and 17/3600), the job is still
    exactly on the half cent: each job's exact sum is rounded once, in Python and in PostgreSQL."""
    gpu = f.make_gpu_type("L4")
    f.make_price_rate(gpu, "1.0000", "reserved", NOW - timedelta(days=30))
    l1, l2 = (f.make_node(gpu, name, capacity_tier="reserved") for name in ("l1", "l2"))
    t = NOW - timedelta(hours=1)
    down, up, split = new_job(), new_job(), new_job()
    add_run(down, [(l1, 1)], t, t + timedelta(seconds=18))
    add_run(up, [(l1, 1)], t, t + timedelta(seconds=54))
    add_run(split, [(l1, 1)], t, t + timedelta(seconds=1))
    add_run(split, [(l2, 1)], t + timedelta(seconds=5), t + timedelta(seconds=22))
    expected = {down.pk: Decimal("0.00"), up.pk: Decimal("0.02"), split.pk: Decimal("0.00")}
    assert job_costs.jobs_costs(list(expected), NOW) == expected
    for pk, cost in expected.items():
        assert job_costs.jobs_total_cost(Job.objects.filter(pk=pk), NOW) == cost
    assert job_costs.jobs_total_cost(Job.objects.filter(pk__in=expected), NOW) == Decimal("0.02")


def test_random_jobs_cost_the_sum_of_their_cents(priced) -> None:
    rng = random.Random(90)
    nodes = list(priced.values())
    jobs = []
    for _ in range(60):
        job = new_job()
        start = NOW - timedelta(days=rng.uniform(0, 9), microseconds=rng.randrange(1_000_000))
        for _run_no in range(rng.choice((1, 1, 2))):
            end = start + timedelta(seconds=rng.uniform(1, 3 * 86400), microseconds=rng.randrange(1_000_000))
            held = rng.sample(nodes, rng.choice((1, 2)))
            run = add_run(job, [(node, rng.randint(1, 8)) for node in held], start,
                       None if end > NOW and rng.random() < 0.5 else end, live=False)
            if len(held) == 2 and rng.random() < 0.3:
                add_member_exit(run, held[1], start + (end - start) / 3)
            start = end + timedelta(seconds=rng.uniform(0, 600))
        jobs.append(job)
    each = job_costs.jobs_costs([job.pk for job in jobs], NOW)
    # each job's cost is its runs' (run_costs: the spans priced in Python, as the runs list says)
    assert each == {job.pk: job_costs.run_costs(job.pk, NOW).total_usd for job in jobs}
    for job in jobs[:20]:
        assert job_costs.jobs_total_cost(Job.objects.filter(pk=job.pk), NOW) == each[job.pk]
    assert job_costs.jobs_total_cost(Job.objects.all(), NOW) == sum(each.values(), Decimal("0.00"))
    # a filtered set: a team's, as a member's history page asks it
    team_jobs = Job.objects.filter(team__in=[job.team_id for job in jobs[::3]])
    assert job_costs.jobs_total_cost(team_jobs, NOW) == sum((each[pk] for pk in team_jobs.values_list("pk", flat=True)),
                                                            Decimal("0.00"))


def test_one_query_for_3_jobs_or_40_and_none_for_a_set_nothing_matches(priced) -> None:
    def add(count: int) -> None:
        for i in range(count):
            add_run(new_job(), [(priced["h1"], 1), (priced["a1"], 2)], NOW - timedelta(hours=30 - i / 2),
                 NOW - timedelta(hours=2))

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            total = job_costs.jobs_total_cost(Job.objects.filter(state=JobState.SUCCEEDED), NOW)
        assert total == sum_of_jobs_costs(list(Job.objects.all())) > 0
        return len(captured)

    add(3)
    three = queries()
    add(37)
    assert three == queries() == 1
    with CaptureQueriesContext(connection) as captured:
        assert job_costs.jobs_total_cost(Job.objects.none(), NOW) == Decimal("0.00")
    assert len(captured) == 0


def test_a_chunk_of_jobs_is_priced_in_one_query_each_as_its_runs_say(priced) -> None:
    """`jobs_costs` (the history CSV's `cost_usd`, 1,000 jobs a call) reads the remembered costs and
    prices the others in one statement, each job to the cent what its runs cost (`run_costs`).
    Before 5 Dec 2026 it took four queries a chunk (the remembered costs, then the others' GPU
    spans, their gang exits and the rates) and priced the spans in Python: most of the 20.7 s of
    the CSV of 100,000 ended jobs with nothing remembered (docs/dashboards.md)."""
    n = priced
    jobs = []
    for i in range(12):
        job = new_job(JobState.RUNNING if i % 5 == 4 else JobState.SUCCEEDED)
        start = NOW - timedelta(days=i % 9, hours=i + 6, microseconds=7 * i)
        run = add_run(job, [(n["h1"], 1 + i % 8), (n[("hs", "a1", "a2", "h2")[i % 4]], 2)], start,
                      None if i % 5 == 4 else start + timedelta(hours=5 + i, seconds=i), live=False)
        if i % 3 == 0:
            add_member_exit(run, n["h1"], start + timedelta(hours=2, microseconds=1))
        jobs.append(job)
    never = new_job(JobState.CANCELLED)
    ids = [job.pk for job in [*jobs, never]]
    assert job_costs.remember_ended_job_costs(NOW - timedelta(hours=6)) > 0  # some remembered, some not
    with CaptureQueriesContext(connection) as captured:
        each = job_costs.jobs_costs(ids, NOW)
    assert len(captured) == 1, [q["sql"][:80] for q in captured]
    assert each == {pk: job_costs.run_costs(pk, NOW).total_usd for pk in ids}
    assert each[never.pk] == Decimal("0.00") and all(each[job.pk] > 0 for job in jobs)


def test_a_set_that_repeats_its_jobs_counts_each_once_and_only_it_is_made_distinct(priced) -> None:
    """The set's jobs were made distinct whatever its filters: a hash of every job of the whole
    history (99,566 on bench/scale_audit.py's installation), though only a filter that joins a
    relation a job has many of (its allocations, its events) repeats a job. Such a set is still
    counted once a job; the others are read as they are."""
    requeued = new_job()
    add_run(requeued, [(priced["h1"], 2)], NOW - timedelta(days=2), NOW - timedelta(days=1, hours=20))
    add_run(requeued, [(priced["a1"], 8)], NOW - timedelta(days=1, hours=19), NOW - timedelta(hours=1))
    once = new_job()
    add_run(once, [(priced["h2"], 4)], NOW - timedelta(hours=9), NOW - timedelta(hours=3))
    whole = sum_of_jobs_costs([requeued, once])

    repeated = Job.objects.filter(allocations__isnull=False)  # the requeued job's two runs: two rows
    assert repeated.count() == 3  # the test's premise
    plain = Job.objects.filter(team__name__in=[requeued.team.name, once.team.name])  # a join to its team: none

    for jobs, distinct in ((repeated, True), (plain, False)):
        with CaptureQueriesContext(connection) as captured:
            assert job_costs.jobs_total_cost(jobs, NOW) == whole
        assert ("SELECT DISTINCT pk, requeues" in captured[0]["sql"]) is distinct
