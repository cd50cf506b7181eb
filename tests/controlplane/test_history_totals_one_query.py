"""The history's totals in one query (`job_history.history_totals`, PostgreSQL rounding each job's
GPU-hours) say figure for figure what adding up every row's own figures says
(`history_totals_row_by_row`, the totals as the page computed them until 1 December 2026, and
the sum of each job's `gpu_hours` as the API and the rows say it): on jobs the accounting rolled
up from real runs (preempted and run again, a run over midnight, a gang over two nodes), on day
rows whose GPU-hours fall exactly half way between two 0.0001 h steps (rounded to the even
step, as Python's Decimal rounds them), and under every history filter."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from django.db import connection, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.filtersets import JobHistoryFilterSet
from controlplane.models import Allocation, AllocationGpu, Job, Node, UsageRollup
from controlplane.models.usage import RollupBucket
from controlplane.services import accounting, job_costs, job_history
from tests.controlplane import factories as f
from tests.controlplane.built_once import Shared, built_once
from tests.controlplane.fleet_fixture import Fleet, build_fleet

pytestmark = pytest.mark.django_db
_generation = iter(range(1, 100_000))
BEFORE_0024 = [("controlplane", "0023_job_singleton")]
AFTER_0024 = [("controlplane", "0024_job_day_gpu_seconds")]
_ENDED = [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT]
SHARED = Shared()


def _run(job: Job, node: Node, start: datetime, end: datetime, gpus: int) -> None:
    allocation = Allocation.objects.create(job=job, generation=next(_generation), epoch=1, created_at=start,
                                           started_at=start, released_at=end, state=AllocationState.RELEASED)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i, live=False)
                                      for i in range(gpus))


def _figures(totals: job_history.HistoryTotals) -> tuple[int, dict[str, int], Decimal, Decimal, float, float]:
    return (totals.jobs, dict(totals.states), totals._gpu_hours, totals._lost_gpu_hours, totals.gpu_hours,
            totals.lost_gpu_hours)


def _rows_added_up(jobs: Any) -> tuple[int, Decimal, Decimal]:
    """The definition: each job's row figures (`gpu_hours`, `lost_gpu_hours`), added exactly."""
    listed = list(jobs)
    job_history.attach_history(listed)
    return (len(listed), sum((Decimal(str(job_history.gpu_hours(j))) for j in listed), Decimal(0)),
            sum((Decimal(str(job_history.lost_gpu_hours(j))) for j in listed), Decimal(0)))


def _day_row(job: Job, fleet: Fleet, day: datetime, seconds: str) -> UsageRollup:
    return UsageRollup(bucket=RollupBucket.DAY, start=day, job=job, team=job.team, project=job.project,
                       priority_class=job.priority_class, gpu_type=fleet.h100, capacity_tier="on_demand",
                       allocated_gpu_seconds=Decimal(seconds))


def test_a_half_step_rounds_to_the_even_step_per_job_not_per_day_row(fleet: Fleet) -> None:
    """0.0001 GPU-hours is 0.36 GPU-seconds: 0.18 s is exactly half a step. Each job's day rows
    are summed first, then rounded half to even, as `gpu_hours` (Python's Decimal) rounds."""
    day = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=3)
    cases = {  # day rows' GPU-seconds: the job's GPU-hours as its row says them
        "half-to-even-down": (["3600.180000"], "1.0000"),  # 1.00005 h: the even step is 1.0000 (not 1.0001)
        "half-to-even-up": (["3600.540000"], "1.0002"),  # 1.00015 h → 1.0002
        "tiny-half": (["0.180000"], "0.0000"),  # 0.00005 h → 0.0000
        "two-halves-make-a-step": (["0.180000", "0.180000"], "0.0001"),  # rounded per row: 0 + 0
        "just-over-half": (["0.180001"], "0.0001"),
        "just-under-half": (["0.179999"], "0.0000"),
        "three-days": (["86400.000000", "43200.090000", "0.090000"], "36.0000"),  # 129,600.18 s: 36.00005 h → even 36.0000
        "two-days-odd": (["1800.270000", "1800.270000"], "1.0002"),  # 3,600.54 s: 1.00015 h → even 1.0002
        "no-rows": ([], "0.0000"),
    }
    rows = []
    for i, (name, (seconds, _)) in enumerate(cases.items()):
        job = f.make_job(fleet.ml, name=name, state=JobState.SUCCEEDED, submitted_at=day, started_at=day,
                         finished_at=day + timedelta(hours=2, minutes=i))
        rows += [_day_row(job, fleet, day - timedelta(days=k), s) for k, s in enumerate(seconds)]
    UsageRollup.objects.bulk_create(rows)
    for name, (_, hours) in cases.items():
        ended = job_history.ended_jobs(Job.objects.filter(name=name))
        assert job_history.history_totals(ended)._gpu_hours == Decimal(hours), name
        assert job_history.history_totals_row_by_row(ended)._gpu_hours == Decimal(hours), name
        assert f"{job_history.gpu_hours(ended.get()):.4f}" == hours, name
    everything = job_history.ended_jobs(Job.objects.all())
    assert job_history.history_totals(everything)._gpu_hours == sum((Decimal(h) for _, h in cases.values()), Decimal(0))


def test_one_query_matches_on_many_random_jobs(fleet: Fleet) -> None:
    """300 ended jobs of both teams and every ended state, each with 0 to 3 day rows of random
    micro-GPU-seconds (a quarter of them exact half steps) and a loss drawn from a few values."""
    rng = random.Random(20261201)
    day = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=10)
    jobs = [Job(team=rng.choice([fleet.ml, fleet.vision]), priority_class=fleet.research, name=f"r{i}", gpus=1,
                runtime_limit_s=3600, state=rng.choice(_ENDED), submitted_at=day, state_changed_at=day,
                started_at=day, finished_at=day + timedelta(seconds=i),
                lost_gpu_seconds=rng.choice([0.0, 0.0, 0.0, 600.0, 1_234.5678, 0.18, 7_200.0 / 7]))
            for i in range(300)]
    Job.objects.bulk_create(jobs)
    rows = []
    for job in Job.objects.filter(name__startswith="r"):
        for k in range(rng.randrange(4)):
            # micro-GPU-seconds: 0.0001 h is 360,000 of them, a half step 180,000 past a whole one
            if rng.random() < 0.25:
                micro = rng.randrange(8 * 86400 * 10**6 // 360_000) * 360_000 + 180_000
            else:
                micro = rng.randrange(8 * 86400 * 10**6)
            rows.append(_day_row(job, fleet, day - timedelta(days=k), f"{micro // 10**6}.{micro % 10**6:06d}"))
    UsageRollup.objects.bulk_create(rows)
    ended = job_history.ended_jobs(Job.objects.all())
    new = job_history.history_totals(ended)
    assert _figures(new) == _figures(job_history.history_totals_row_by_row(ended))
    assert (new.jobs, new._gpu_hours, new._lost_gpu_hours) == _rows_added_up(ended)
    assert new.jobs == 300


# The tests below on `rolled_up` share one build of it (tests/controlplane/built_once.py), so
# those without it come first; pytest-django runs the transactional ones last.


@pytest.fixture(scope="module")
def _rolled_up_once(django_db_setup: Any, django_db_blocker: Any) -> Iterator[tuple[Fleet, dict[str, int]]]:
    """The history below, built once for the module's tests on it (the accounting's catch-up over
    three days of minutes took ~4 s a test, 12 under load): tests/controlplane/built_once.py."""

    def build() -> tuple[Fleet, dict[str, int]]:
        fleet = build_fleet()
        return fleet, {key: job.pk for key, job in _build_rolled_up(fleet).items()}

    yield from built_once(django_db_blocker, build, SHARED)


@pytest.fixture(autouse=True)
def _shared_rows_only_on_their_tests(request: pytest.FixtureRequest) -> None:
    SHARED.only_for(request, "rolled_up")


@pytest.fixture
def fleet(request: pytest.FixtureRequest, db: Any) -> Fleet:
    """A fleet of its own for each test, but the shared one (read again) for those on `rolled_up`."""
    if "rolled_up" not in request.fixturenames:
        return build_fleet()
    shared = request.getfixturevalue("_rolled_up_once")[0]
    again = {name: type(value).objects.get(pk=value.pk) for name, value in vars(shared).items()
             if hasattr(value, "pk")}
    return Fleet(**again, nodes=[Node.objects.get(pk=n.pk) for n in shared.nodes],
                 users={role: type(u).objects.get(pk=u.pk) for role, u in shared.users.items()})


@pytest.fixture
def rolled_up(_rolled_up_once: tuple[Fleet, dict[str, int]]) -> dict[str, Job]:
    """The shared history's jobs, read again for each test (a test may change or delete them)."""
    return {key: Job.objects.get(pk=pk) for key, pk in _rolled_up_once[1].items()}


def _build_rolled_up(fleet: Fleet) -> dict[str, Job]:
    """Two days of ended work of both teams, rolled up by the accounting from the runs: a job
    preempted off one node and finished on another (lost work), one preempted twice, a gang on
    two nodes, a run over midnight (two day rows), a failure, a timeout, one cancelled before it
    ran, two that lost the same work; and a running job (never in the history)."""
    now = timezone.now().astimezone(UTC).replace(second=0, microsecond=0)
    midnight = now.replace(hour=0, minute=0) - timedelta(days=1)  # yesterday's start: every run ended
    t0 = midnight - timedelta(hours=20)
    alice, bob = fleet.users["owner"], fleet.users["other_team"]
    h1, h2, h3 = fleet.nodes[1], fleet.nodes[2], fleet.nodes[3]
    jobs: dict[str, Job] = {}

    def ended(key: str, team: Any, state: str, runs: list[tuple[Node, datetime, datetime, int]], **kw: Any) -> None:
        last = runs[-1] if runs else None
        kw.setdefault("exit_code", 0 if state == JobState.SUCCEEDED else (None if state == JobState.CANCELLED else 1))
        job = f.make_job(team, name=key, state=state, submitted_at=t0,
                         started_at=last[1] if last else None,
                         finished_at=last[2] if last else t0 + timedelta(hours=1), **kw)
        for node, start, end, gpus in runs:
            _run(job, node, start, end, gpus)
        jobs[key] = job

    ended("moved", fleet.ml, JobState.SUCCEEDED, [(h1, t0, t0 + timedelta(minutes=47, seconds=13), 8),
                                                  (h2, t0 + timedelta(hours=1), t0 + timedelta(hours=2, minutes=7), 4)],
          gpus=8, min_gpus=4, max_gpus=8, submitter=alice, preemption_count=1, requeue_count=1,
          lost_gpu_seconds=8 * 1_333.0, project=fleet.llm)
    ended("twice", fleet.ml, JobState.SUCCEEDED, [(h1, t0 + timedelta(hours=3), t0 + timedelta(hours=3, minutes=20), 2),
                                                  (h3, t0 + timedelta(hours=4), t0 + timedelta(hours=4, minutes=31), 2),
                                                  (h2, t0 + timedelta(hours=5), t0 + timedelta(hours=6, minutes=2), 2)],
          gpus=2, submitter=alice, preemption_count=2, requeue_count=2, lost_gpu_seconds=2 * 1_111.7)
    ended("gang", fleet.vision, JobState.FAILED, [(h2, t0 + timedelta(hours=7), t0 + timedelta(hours=8, minutes=11), 8),
                                                  (h3, t0 + timedelta(hours=7), t0 + timedelta(hours=8, minutes=11), 8)],
          gpus=16, submitter=bob, exit_code=137)
    ended("midnight", fleet.ml, JobState.TIMED_OUT,
          [(h3, midnight - timedelta(hours=1, minutes=3), midnight + timedelta(minutes=58, seconds=7), 1)],
          gpus=1, submitter=alice, exit_code=None)
    ended("never-ran", fleet.vision, JobState.CANCELLED, [], submitter=bob)
    for key in ("same-loss-1", "same-loss-2"):
        ended(key, fleet.vision, JobState.SUCCEEDED, [(h1, t0 + timedelta(hours=9), t0 + timedelta(hours=9, minutes=13), 1)],
              submitter=bob, requeue_count=1, lost_gpu_seconds=600.0)
    f.make_job(fleet.ml, name="running", state=JobState.RUNNING, started_at=now - timedelta(minutes=5))
    accounting.catch_up(now)
    return jobs


def test_one_query_says_what_adding_up_the_rows_says(rolled_up: dict[str, Job], fleet: Fleet) -> None:
    ended = job_history.ended_jobs(Job.objects.all())
    assert UsageRollup.objects.filter(bucket=RollupBucket.DAY, job=rolled_up["midnight"]).count() == 2
    new, old = job_history.history_totals(ended), job_history.history_totals_row_by_row(ended)
    assert _figures(new) == _figures(old)
    jobs, gpu_hours, lost = _rows_added_up(ended)
    assert (new.jobs, new._gpu_hours, new._lost_gpu_hours) == (jobs, gpu_hours, lost) == (7, gpu_hours, lost)
    assert new.states == {"succeeded": 4, "failed": 1, "timed_out": 1, "cancelled": 1}
    # the accounting's own figure per job, e.g. the preempted job: 8 GPUs × 47 min 13 s + 4 × 67 min
    assert job_costs.job_cost(rolled_up["moved"].pk)["gpu_hours_allocated"] == Decimal("10.7622")
    # moved 10.7622, twice 2 × 113 min 3.7667, gang 16 × 71 min 18.9333, midnight 2 h 1 min 7 s
    # 2.0186, the same losses 2 × 13 min 0.2167 each, never-ran 0
    assert gpu_hours == Decimal("10.7622") + Decimal("3.7667") + Decimal("18.9333") + Decimal("2.0186") + 2 * Decimal("0.2167")
    # 8 × 1,333 s 2.9622, 2 × 1,111.7 s 0.6176, 600 s 0.1667 twice
    assert lost == Decimal("2.9622") + Decimal("0.6176") + 2 * Decimal("0.1667")


def test_one_query_under_every_history_filter(rolled_up: dict[str, Job], fleet: Fleet) -> None:
    admin = SimpleNamespace(user=fleet.users["admin"])
    midnight = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    for params in ({}, {"team": "ml"}, {"team": "vision"}, {"user": "alice"}, {"state": ["failed", "timed_out"]},
                   {"ran_on": fleet.nodes[1].name}, {"ran_on": fleet.nodes[3].name}, {"name": "loss"},
                   {"exit_code": "0"}, {"finished_after": midnight.isoformat()},
                   {"started_before": midnight.isoformat()}, {"ran_longer_than_s": "3600"}, {"project": "llm"}):
        # The names are checked against what the reader may see: an admin's request, every team.
        filterset = JobHistoryFilterSet(params, queryset=Job.objects.all(), request=admin)
        assert filterset.is_valid(), filterset.errors
        ended = job_history.ended_jobs(filterset.qs)
        new = job_history.history_totals(ended)
        assert _figures(new) == _figures(job_history.history_totals_row_by_row(ended)), params
        assert (new.jobs, new._gpu_hours, new._lost_gpu_hours) == _rows_added_up(ended), params


def test_the_totals_are_one_query_whatever_the_number_of_jobs(rolled_up: dict[str, Job]) -> None:
    ended = job_history.ended_jobs(Job.objects.all())
    with CaptureQueriesContext(connection) as captured:
        totals = job_history.history_totals(ended)
    assert totals.jobs == 7 and len(captured) == 1, [q["sql"][:200] for q in captured]


def test_a_scope_with_no_team_costs_no_query(rolled_up: dict[str, Job]) -> None:
    """Finance's jobs scope (no team): the filter matches nothing, so nothing is asked."""
    ended = job_history.ended_jobs(Job.objects.filter(team_id__in=[]))
    with CaptureQueriesContext(connection) as captured:
        totals = job_history.history_totals(ended)
    assert _figures(totals) == (0, {}, Decimal(0), Decimal(0), 0.0, 0.0) and len(captured) == 0


# ------------------------------------------------------------- each job's day sum, kept by triggers


def _sums() -> dict[int, Decimal]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id, allocated_gpu_seconds FROM {job_history.JOB_DAY_SUMS} "
                       "WHERE allocated_gpu_seconds <> 0")
        return dict(cursor.fetchall())


def _summed_rows() -> dict[int, Decimal]:
    """What summing the day rows says, job by job (the definition the kept sums must equal)."""
    return {job_id: seconds for job_id, seconds in
            UsageRollup.objects.filter(bucket=RollupBucket.DAY).order_by().values("job_id")
            .annotate(s=Sum("allocated_gpu_seconds")).values_list("job_id", "s") if seconds}


def test_each_jobs_day_sum_follows_every_write_to_the_day_rows(rolled_up: dict[str, Job], fleet: Fleet) -> None:
    assert _sums() == _summed_rows() and len(_sums()) == 6  # the accounting's own writes: all but never-ran
    day = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=5)
    extra = f.make_job(fleet.ml, name="extra", state=JobState.SUCCEEDED, started_at=day, finished_at=day)
    rows = [_day_row(extra, fleet, day - timedelta(days=k), "100.250000") for k in range(3)]
    hour = _day_row(extra, fleet, day, "5000.000000")
    hour.bucket = RollupBucket.HOUR  # not a day row: never in the sum
    UsageRollup.objects.bulk_create([*rows, hour])
    assert _sums()[extra.pk] == Decimal("300.750000") and _sums() == _summed_rows()

    UsageRollup.objects.filter(job=extra, bucket=RollupBucket.DAY, start=day).update(allocated_gpu_seconds=Decimal("0.5"))
    assert _sums()[extra.pk] == Decimal("201.000000") and _sums() == _summed_rows()
    UsageRollup.objects.filter(job=extra, bucket=RollupBucket.HOUR).update(bucket=RollupBucket.DAY, start=day - timedelta(days=9))
    assert _sums()[extra.pk] == Decimal("5201.000000") and _sums() == _summed_rows()  # an hour row made a day row
    UsageRollup.objects.filter(job=extra, start=day - timedelta(days=1)).update(bucket=RollupBucket.MONTH)
    assert _sums()[extra.pk] == Decimal("5100.750000") and _sums() == _summed_rows()  # and one moved out
    UsageRollup.objects.filter(job=extra, bucket=RollupBucket.DAY).update(job=rolled_up["never-ran"])  # to another job
    assert extra.pk not in _sums() and _sums()[rolled_up["never-ran"].pk] == Decimal("5100.750000")
    assert _sums() == _summed_rows()

    UsageRollup.objects.filter(job=rolled_up["never-ran"], start=day).delete()
    rolled_up["gang"].delete()  # its rollups go with it (CASCADE), and its sum
    assert rolled_up["gang"].pk is None and _sums() == _summed_rows()
    assert len(_sums()) == 6  # never-ran now has rows; gang has none

    accounting.catch_up(timezone.now())  # the accounting writing again (nothing new to add)
    assert _sums() == _summed_rows()
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the test's transaction: its deferred key checks first
        cursor.execute(f'TRUNCATE "{UsageRollup._meta.db_table}"')  # as a test suite's flush empties it
    assert _sums() == {} == _summed_rows()


def test_history_totals_read_the_kept_sums_as_the_rows_say_them(rolled_up: dict[str, Job], fleet: Fleet) -> None:
    """If the kept sum and the rows ever parted, the totals would show it: here they are made to
    part on purpose (a write with the triggers off), and the totals follow the kept sum."""
    ended = job_history.ended_jobs(Job.objects.all())
    assert _figures(job_history.history_totals(ended)) == _figures(job_history.history_totals_row_by_row(ended))
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {job_history.JOB_DAY_SUMS} SET allocated_gpu_seconds = allocated_gpu_seconds + 3600 "
                       "WHERE job_id = %s", [rolled_up["moved"].pk])
    assert job_history.history_totals(ended)._gpu_hours == job_history.history_totals_row_by_row(ended)._gpu_hours + 1


@pytest.mark.django_db(transaction=True)
def test_two_writers_at_once_lose_no_second(fleet: Fleet) -> None:
    """The accounting and a recomputation writing one job's day rows at the same moment: the
    second waits on the job's kept sum, then adds its own difference to what the first committed."""
    day = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=4)
    job = f.make_job(fleet.ml, name="both", state=JobState.SUCCEEDED, started_at=day, finished_at=day)
    UsageRollup.objects.bulk_create([_day_row(job, fleet, day, "1000.000000")])
    first_wrote, errors = threading.Event(), []

    def writer(rows: list[UsageRollup], delete_start: datetime | None, wait: bool) -> None:
        try:
            if wait:
                assert first_wrote.wait(10)
            with transaction.atomic():
                if delete_start is not None:
                    UsageRollup.objects.filter(job=job, start=delete_start).delete()
                UsageRollup.objects.bulk_create(rows)
                if not wait:
                    first_wrote.set()
                    time.sleep(0.5)  # the other writer is now blocked on this job's sum
        except Exception as exc:  # noqa: BLE001 (reported by the test below)
            errors.append(exc)
        finally:
            connections.close_all()

    one = threading.Thread(target=writer, args=([_day_row(job, fleet, day - timedelta(days=1), "20.500000")], None, False))
    two = threading.Thread(target=writer, args=([_day_row(job, fleet, day - timedelta(days=2), "300.250000")], day, True))
    one.start(), two.start()
    one.join(20), two.join(20)
    assert errors == []
    # 1,000 deleted by the second, 20.5 and 300.25 added
    assert _sums() == _summed_rows() == {job.pk: Decimal("320.750000")}


@pytest.mark.django_db(transaction=True)
def test_migration_0024_sums_the_day_rows_already_there_and_reverses(fleet: Fleet) -> None:
    # The rows are written with today's models (at the latest migration), then 0024 is undone
    # and applied again: its forward step must sum what is there. (Migrating back before writing
    # would write today's columns into an older table.)
    day = timezone.now().astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=2)
    jobs = [f.make_job(fleet.ml, name=f"old-{i}", state=JobState.SUCCEEDED, started_at=day, finished_at=day)
            for i in range(3)]
    hour = _day_row(jobs[2], fleet, day, "77.000000")
    hour.bucket = RollupBucket.HOUR
    UsageRollup.objects.bulk_create([_day_row(jobs[0], fleet, day, "10.000001"),
                                     _day_row(jobs[0], fleet, day - timedelta(days=1), "0.999999"),
                                     _day_row(jobs[1], fleet, day, "0.180000"), hour])
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE_0024)
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER_0024)
        assert _sums() == _summed_rows() == {jobs[0].pk: Decimal("11.000000"), jobs[1].pk: Decimal("0.180000")}
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
        ended = job_history.ended_jobs(Job.objects.all())
        assert _figures(job_history.history_totals(ended)) == _figures(job_history.history_totals_row_by_row(ended))

        executor = MigrationExecutor(connection)
        executor.migrate(BEFORE_0024)  # the table and its triggers go; the rollups stay
        with connection.cursor() as cursor:
            tables = connection.introspection.table_names(cursor)
            cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname LIKE %s", [f"{job_history.JOB_DAY_SUMS}%"])
            assert cursor.fetchone() == (0,)
            cursor.execute("SELECT count(*) FROM controlplane_usagerollup")
            assert job_history.JOB_DAY_SUMS not in tables and cursor.fetchone() == (4,)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
