"""The history's closed totals (services/closed_history.py, migration 0042): `/history/`
unfiltered adds up only the jobs that ended since yesterday's start, the others read as kept per
team and state, and says what adding up every job says, to the 0.0001 GPU-hour and the cent
(`job_history.history_totals_row_by_row`, the reference, and `job_costs.jobs_total_cost`), for
an admin and for a member (their teams' jobs only); after any change to a closed job the whole
set is added up again until the totals are rebuilt; and the page's reads do not grow with the
closed history (tests/controlplane/rows_read.py)."""

from __future__ import annotations

import random
import threading
import time
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job, Team, UsageRollup
from controlplane.models.usage import RollupBucket
from controlplane.services import closed_history, job_costs, job_history
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold
from tests.controlplane.fleet_fixture import Fleet
from tests.controlplane.rows_read import reads_of

pytestmark = pytest.mark.django_db
ENDED = [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT]
TABLES = ("controlplane_job", job_history.JOB_DAY_SUMS, job_costs.ENDED_JOB_COSTS)


def _day_row(job: Job, fleet: Fleet, micro: int, days_back: int = 0) -> UsageRollup:
    assert job.finished_at is not None
    day = job.finished_at.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=days_back)
    return UsageRollup(bucket=RollupBucket.DAY, start=day, job=job, team=job.team, project=job.project,
                       priority_class=job.priority_class, gpu_type=fleet.h100, capacity_tier="on_demand",
                       allocated_gpu_seconds=Decimal(f"{micro // 10**6}.{micro % 10**6:06d}"))


def _history(fleet: Fleet, jobs: int = 80, seed: int = 20261206) -> Team:
    """`jobs` ended jobs of three teams over the last nine days (every end state, some lost
    work, most with a released run priced at the H100's rate, 0 to 2 day rows of GPU-seconds, a
    quarter of them exact half steps of 0.0001 h), a job running for three days and one
    waiting (neither in the history). Returns the third team."""
    rng = random.Random(seed)
    speech = f.make_team("speech", cohort=fleet.ml.cohort, default_priority_class=fleet.research)
    teams = [fleet.ml, fleet.vision, speech]
    now = timezone.now()
    rows = []
    for i in range(jobs):
        ended_at = now - timedelta(minutes=rng.randrange(1, 9 * 1440))
        start = ended_at - timedelta(minutes=rng.randrange(5, 300))
        job = f.make_job(rng.choice(teams), name=f"h{i}", state=rng.choice(ENDED), submitted_at=start,
                         started_at=start, finished_at=ended_at, requeue_count=rng.randrange(2),
                         lost_gpu_seconds=rng.choice([0.0, 0.0, 600.0, 1_234.5678, 0.18, 7_200.0 / 7]))
        if rng.random() < 0.9:
            hold(job, [(rng.choice(fleet.nodes[:4]), rng.choice([1, 2, 8]))], start, ended_at)
        for k in range(rng.randrange(3)):
            half = rng.random() < 0.25
            rows.append(_day_row(job, fleet, rng.randrange(10**11 // 360_000) * 360_000 + 180_000 if half
                                 else rng.randrange(10**11), days_back=k))
    UsageRollup.objects.bulk_create(rows)
    running = f.make_job(fleet.ml, name="running", state=JobState.RUNNING, started_at=now - timedelta(days=3))
    hold(running, [(fleet.nodes[0], 8)], now - timedelta(days=3))
    f.make_job(fleet.vision, name="waiting")
    return speech


def _figures(totals: job_history.HistoryTotals, cost: Decimal) -> tuple[Any, ...]:
    return totals.jobs, dict(sorted(totals.states.items())), totals._gpu_hours, totals._lost_gpu_hours, cost


def _scope(teams: frozenset[int] | None) -> Any:
    jobs = Job.objects.all() if teams is None else Job.objects.filter(team_id__in=teams)
    return job_history.ended_jobs(jobs)


def _old_way(teams: frozenset[int] | None) -> tuple[Any, ...]:
    """What the page said before the closed totals: every ended job of the scope added up."""
    jobs = _scope(teams)
    return _figures(job_history.history_totals_row_by_row(jobs), job_costs.jobs_total_cost(jobs, timezone.now()))


def _new_way(teams: frozenset[int] | None) -> tuple[Any, ...]:
    summary = closed_history.history_summary(_scope(teams), timezone.now(), teams, whole=True)
    return _figures(summary.totals, summary.cost_usd)


def _scopes(fleet: Fleet, speech: Team) -> list[frozenset[int] | None]:
    return [None, frozenset({fleet.ml.pk}), frozenset({fleet.ml.pk, fleet.vision.pk}), frozenset({speech.pk}),
            frozenset()]


def _built(now: Any = None) -> None:
    now = now or timezone.now()
    job_costs.remember_ended_job_costs(now)
    assert closed_history.rebuild(now)


def test_the_closed_totals_and_the_days_since_say_what_every_job_added_up_says(fleet: Fleet) -> None:
    speech = _history(fleet)
    _built()

    closed = closed_history.closed_totals(None)
    assert closed is not None
    horizon, totals, cents = closed
    ended = job_history.ended_jobs(Job.objects.all())
    # both parts hold jobs: the closed ones are read as kept, the others added up
    assert 0 < totals.jobs < ended.count() and cents > 0
    assert totals.jobs == ended.filter(finished_at__lt=horizon).count()
    for teams in _scopes(fleet, speech):
        assert _new_way(teams) == _old_way(teams), teams
    everyone = _old_way(None)
    assert everyone[0] == 80 and everyone[4] > 0 and everyone[2] > 0 and everyone[3] > 0


def _late_day_row(fleet: Fleet, job: Job) -> None:
    UsageRollup.objects.bulk_create([_day_row(job, fleet, 3_600_180_000, days_back=5)])


def _requeued(fleet: Fleet, job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(state=JobState.PENDING, finished_at=None, requeue_count=job.requeue_count + 1)


def _lost_more(fleet: Fleet, job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(lost_gpu_seconds=job.lost_gpu_seconds + 900.0)


def _moved(fleet: Fleet, job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(team=fleet.vision if job.team_id == fleet.ml.pk else fleet.ml)


def _failed_instead(fleet: Fleet, job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(state=JobState.FAILED if job.state != JobState.FAILED else JobState.SUCCEEDED)


def _repriced(fleet: Fleet, job: Job) -> None:
    f.make_price_rate(fleet.h100, "3.1000", effective_from=timezone.now() - timedelta(days=5))


@pytest.mark.parametrize("change", [_late_day_row, _requeued, _lost_more, _moved, _failed_instead, _repriced])
def test_a_change_to_a_closed_job_is_added_up_until_the_totals_are_rebuilt(fleet: Fleet, change: Any) -> None:
    speech = _history(fleet)
    _built()
    before = [_old_way(teams) for teams in _scopes(fleet, speech)]
    closed = closed_history.closed_totals(None)
    assert closed is not None
    # a closed job that ran in the last four days (so a price since five days ago reprices it)
    old = job_history.ended_jobs(Job.objects.filter(finished_at__lt=closed[0], allocations__isnull=False,
                                                    finished_at__gt=timezone.now() - timedelta(days=4))).first()
    assert old is not None

    change(fleet, old)

    assert closed_history.closed_totals(None) is None  # no longer read: every job is added up
    assert [_old_way(teams) for teams in _scopes(fleet, speech)] != before  # the change moved a figure
    for teams in _scopes(fleet, speech):
        assert _new_way(teams) == _old_way(teams), teams
    # the remember task prices what the change left unpriced, then rebuilds them
    job_costs.remember_ended_job_costs(timezone.now())
    assert closed_history.rebuild_if_due(timezone.now())
    assert closed_history.closed_totals(None) is not None
    for teams in _scopes(fleet, speech):
        assert _new_way(teams) == _old_way(teams), teams


def test_they_are_built_only_once_every_closed_jobs_cost_is_remembered(fleet: Fleet) -> None:
    _history(fleet)
    assert not closed_history.rebuild(timezone.now())
    assert closed_history.closed_totals(None) is None
    assert _new_way(None) == _old_way(None)
    job_costs.remember_ended_job_costs(timezone.now())
    assert closed_history.rebuild(timezone.now())
    assert _new_way(None) == _old_way(None)


def test_the_remember_task_builds_them_once_a_day(fleet: Fleet) -> None:
    from controlplane import tasks_accounting

    _history(fleet)
    tasks_accounting.remember_job_costs()
    closed = closed_history.closed_totals(None)
    assert closed is not None and closed[0] == closed_history.horizon_of(timezone.now())
    with connection.cursor() as cursor:  # yesterday's build: due again today
        cursor.execute(f"UPDATE {closed_history.CLOSED} SET horizon = horizon - interval '1 day'")
    assert closed_history.rebuild_if_due(timezone.now())
    closed = closed_history.closed_totals(None)
    assert closed is not None and closed[0] == closed_history.horizon_of(timezone.now())


def _page_totals(client: Client) -> tuple[int, str, str, str]:
    page = client.get("/history/")
    assert page.status_code == 200
    totals = page.context["totals"]
    return totals.jobs, f"{totals.gpu_hours:.4f}", f"{totals.lost_gpu_hours:.4f}", f"{page.context['total_cost_usd']:.2f}"


def _client(fleet: Fleet, role: str) -> Client:
    client = Client()
    client.force_login(fleet.users[role])
    return client


def test_the_page_says_the_same_totals_to_an_admin_and_to_a_member(fleet: Fleet) -> None:
    _history(fleet)
    _built()
    assert closed_history.closed_totals(None) is not None
    for role, teams in (("admin", None), ("owner", frozenset({fleet.ml.pk})), ("other_team", frozenset({fleet.vision.pk}))):
        jobs, _, gpu_hours, lost, cost = _old_way(teams)
        assert _page_totals(_client(fleet, role)) == (jobs, f"{float(gpu_hours):.4f}", f"{float(lost):.4f}", f"{cost:.2f}"), role


def _closed_jobs(fleet: Fleet, n: int, first: int) -> None:
    """`n` jobs of ml that ended three days ago, each with a day row and a remembered cost."""
    ended_at = timezone.now() - timedelta(days=3)
    jobs = Job.objects.bulk_create(
        Job(team=fleet.ml, priority_class=fleet.research, name=f"c{first + i}", gpus=1, runtime_limit_s=3600,
            state=JobState.SUCCEEDED, submitted_at=ended_at, state_changed_at=ended_at, started_at=ended_at,
            finished_at=ended_at - timedelta(seconds=i), lost_gpu_seconds=60.0) for i in range(n))
    UsageRollup.objects.bulk_create([_day_row(job, fleet, 7_200_000_000) for job in jobs])
    job_costs.remember_ended_job_costs(timezone.now())
    _analysed()


def _analysed() -> None:
    """The planner's row counts of the test's rows, asked right before each read measured: ANALYZE
    writes a table's row count in place, outside the test's transaction, and so does an
    autovacuum of the table's committed (empty) state, which the suite's churn can start at any
    moment."""
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE controlplane_job, {job_history.JOB_DAY_SUMS}, {job_costs.ENDED_JOB_COSTS}")


def test_the_page_reads_no_more_rows_for_more_closed_history(fleet: Fleet) -> None:
    admin = _client(fleet, "admin")
    now = timezone.now()
    for i in range(3):  # the days since: ended an hour ago, read every time
        f.make_job(fleet.vision, name=f"recent{i}", state=JobState.SUCCEEDED, submitted_at=now - timedelta(hours=2),
                   started_at=now - timedelta(hours=2), finished_at=now - timedelta(hours=1))

    def reads() -> tuple[dict[str, int], dict[str, int]]:
        admin.get("/history/")
        everyone = job_history.ended_jobs(Job.objects.all())
        _analysed()
        summary = reads_of(lambda: closed_history.history_summary(everyone, timezone.now(), None, whole=True), *TABLES)
        _analysed()
        return summary, reads_of(lambda: admin.get("/history/"), *TABLES)

    _closed_jobs(fleet, 60, 0)
    _built()
    fewer, fewer_page = reads()
    _closed_jobs(fleet, 90, 60)
    _built()
    more, more_page = reads()
    # the totals read the 3 jobs since yesterday (once for the totals, once for the cost) and their
    # day sums and costs, whatever the closed history (every ended job and its rows before: 63,
    # then 153, each twice)
    assert more == fewer, (fewer, more)
    assert more["controlplane_job"] <= 10 and more[job_history.JOB_DAY_SUMS] <= 3, more
    assert more[job_costs.ENDED_JOB_COSTS] <= 3, more
    # the page: those, and its 50 rows (their costs, looked up by the page's ids, are
    # job_costs.jobs_costs' own reads: on so few rows the planner merges them along the key).
    # No more rows for more history; not always the same: under `make test` (6 Dec, twice) the
    # smaller history's page read 123 job rows and the larger one's 111, another plan for 63
    # ended jobs than for 153, and it passed alone; on 7 Dec 110 then 111. A read that grew with
    # the history would read the 90 more ended jobs: a plan's few rows either way are not that.
    assert more_page["controlplane_job"] < fewer_page["controlplane_job"] + 15, (fewer_page, more_page)
    assert more_page[job_history.JOB_DAY_SUMS] <= fewer_page[job_history.JOB_DAY_SUMS], (fewer_page, more_page)
    assert more_page["controlplane_job"] <= 2 * 50 + 11, more_page  # the page read, its costs, the totals
    assert _page_totals(admin)[0] == 153
    # the session, the user, the memberships, the team menu; the closed totals (one), the days
    # since: their totals (one) and their cost (one); the page's jobs; their GPU-hours and
    # nodes (one); their costs (one)
    with CaptureQueriesContext(connection) as queries:
        assert admin.get("/history/").status_code == 200
    assert len(queries) == 10, [q["sql"][:80] for q in queries]


@pytest.mark.django_db(transaction=True)
def test_a_change_committed_while_they_are_rebuilt_is_not_read_as_added(fleet: Fleet) -> None:
    """A requeue of a closed job whose trigger ran before the rebuild read `changes`, committed
    after the rebuild read the jobs: the rebuild did not see it, and the totals it wrote are not
    read (the change count moved past theirs) until the next rebuild."""
    _history(fleet, jobs=30)
    job_costs.remember_ended_job_costs(timezone.now())
    horizon = closed_history.horizon_of(timezone.now())
    old = job_history.ended_jobs(Job.objects.filter(finished_at__lt=horizon)).first()
    assert old is not None
    changed, errors = threading.Event(), []

    def requeue() -> None:
        try:
            with transaction.atomic():
                Job.objects.filter(pk=old.pk).update(state=JobState.PENDING, finished_at=None,
                                                     requeue_count=old.requeue_count + 1)
                changed.set()
                time.sleep(1.0)  # the rebuild reads meanwhile, then waits on the closed row
        except Exception as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)
        finally:
            connections.close_all()

    writer = threading.Thread(target=requeue)
    writer.start()
    assert changed.wait(10)
    assert closed_history.rebuild(timezone.now())  # read without the requeue, written after its commit
    writer.join(20)
    assert errors == []
    assert closed_history.closed_totals(None) is None
    assert _new_way(None) == _old_way(None)
    job_costs.remember_ended_job_costs(timezone.now())
    assert closed_history.rebuild_if_due(timezone.now())
    assert closed_history.closed_totals(None) is not None and _new_way(None) == _old_way(None)


@pytest.mark.django_db(transaction=True)
def test_migration_0042_leaves_them_unread_until_the_cost_task_builds_them_and_reverses(fleet: Fleet) -> None:
    _history(fleet, jobs=30)
    job_costs.remember_ended_job_costs(timezone.now())
    executor = MigrationExecutor(connection)
    executor.migrate([("controlplane", "0041_node_agent_refused_event_kind")])
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname LIKE %s", [f"{closed_history.CLOSED}%"])
            assert cursor.fetchone() == (0,)
            assert closed_history.TOTALS not in connection.introspection.table_names(cursor)
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        assert closed_history.closed_totals(None) is None  # unbuilt: the history adds up every job
        assert _new_way(None) == _old_way(None)
        assert closed_history.rebuild_if_due(timezone.now())  # as the cost task does each minute
        closed = closed_history.closed_totals(None)
        assert closed is not None and closed[1].jobs > 0
        assert _new_way(None) == _old_way(None)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
