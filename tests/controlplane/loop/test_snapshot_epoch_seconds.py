"""The snapshot reads its timestamps as epoch seconds computed by the database (`EpochSeconds`).

The engine input must be exactly what the reader produced when it read datetimes and called
`.timestamp()` on them: the reference conversion is kept here (`_reference`), applied to the same
rows read as datetimes through the ORM, and the whole snapshot is compared for equality (floats
bit for bit). The fleet has pending and running jobs, checkpoints, NULL timestamps (an allocation
never reported started, a job never checkpointed or preempted), values written in several time
zones, sub-second values down to the microsecond, a preemption exactly on its budget window's
edge, and dates before 1970 and far ahead.

On PostgreSQL (the suite's database) directly; on SQLite (the demo's) in a subprocess that
migrates a fresh SQLite file and runs the same check.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

import scheduler_core as engine
from controlplane.choices import AllocationState, JobState
from controlplane.models import (
    Allocation,
    AllocationGpu,
    Cohort,
    GpuType,
    Job,
    Node,
    PriorityClass,
    Quota,
    Team,
)
from controlplane.services.snapshot import EpochSeconds, read_snapshot

REPO = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 11, 29, 15, 30, 12, 345678, tzinfo=UTC)
WINDOW_S = 86400

# Instants as written by API clients and agents in their own zones, with awkward microseconds.
KOLKATA = ZoneInfo("Asia/Kolkata")
NEW_YORK = ZoneInfo("America/New_York")
INSTANTS = [
    NOW - timedelta(seconds=1),
    NOW - timedelta(microseconds=1),
    datetime(2026, 11, 29, 20, 59, 59, 999999, tzinfo=KOLKATA),
    datetime(2026, 3, 8, 1, 59, 59, 500000, tzinfo=NEW_YORK),  # just before a DST jump
    datetime(2026, 11, 1, 1, 30, 0, 1, tzinfo=NEW_YORK, fold=1),  # the repeated hour, second pass
    datetime(2026, 11, 29, 0, 0, 0, tzinfo=UTC),  # no sub-second part at all
    datetime(2026, 6, 30, 23, 59, 59, 999999, tzinfo=UTC),
    datetime(2001, 9, 9, 1, 46, 40, 123457, tzinfo=UTC),
    datetime(1969, 12, 31, 23, 59, 58, 750000, tzinfo=UTC),  # before the epoch: negative seconds
    datetime(2099, 12, 31, 23, 59, 59, 999999, tzinfo=KOLKATA),
]


def build_fleet() -> None:
    """Three 8-GPU nodes, two teams, six running jobs and twenty pending ones over INSTANTS."""
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    nodes = [
        Node.objects.create(name=f"n{i}", pool="h100", gpu_type=h100, gpu_count=8, cpus=96, memory_gb=1024,
                            leaf_switch=f"leaf-{i // 2}", spine="spine-1")
        for i in range(3)
    ]
    cohort = Cohort.objects.create(name="all")
    research = PriorityClass.objects.create(name="research", value=500, preemption_budget=2, budget_window_s=WINDOW_S)
    urgent = PriorityClass.objects.create(name="urgent", value=900, budget_window_s=3600)
    teams = [Team.objects.create(name=name, cohort=cohort, default_priority_class=research, usage_as_of=NOW)
             for name in ("ml", "vision")]
    for team in teams:
        Quota.objects.create(team=team, gpu_type=h100, nominal_gpus=16)
    edge = NOW - timedelta(seconds=WINDOW_S)
    preempted = [None, edge, edge - timedelta(microseconds=1), edge + timedelta(microseconds=1),
                 NOW - timedelta(hours=2), datetime(2026, 11, 28, 21, 0, 12, 345678, tzinfo=KOLKATA)]
    n = 0

    def job(state: str, submitted: datetime, **extra: object) -> Job:
        nonlocal n
        n += 1
        at = preempted[n % len(preempted)]
        return Job.objects.create(
            team=teams[n % 2], name=f"j{n}", priority_class=(research, urgent)[n % 3 == 0], gpus=1,
            runtime_limit_s=3600, checkpoint_interval_s=600 if n % 2 else None, state=state,
            submitted_at=submitted, state_changed_at=submitted,
            preemption_count=0 if at is None else 1 + n % 3, last_preempted_at=at, **extra,
        )

    for i, submitted in enumerate(INSTANTS * 2):
        job(JobState.PENDING, submitted + timedelta(microseconds=i // len(INSTANTS)))
    for i in range(6):
        checkpoint = None if i % 3 == 0 else INSTANTS[(i + 3) % len(INSTANTS)]
        running = job(JobState.RUNNING, INSTANTS[i], last_checkpoint_at=checkpoint)
        allocation = Allocation.objects.create(
            job=running, generation=10 + i, epoch=1,
            state=AllocationState.RELEASING if i == 5 else AllocationState.ACTIVE,
            created_at=INSTANTS[(i + 1) % len(INSTANTS)],
            started_at=None if i % 2 else INSTANTS[(i + 2) % len(INSTANTS)],  # never reported: created_at counts
        )
        AllocationGpu.objects.create(allocation=allocation, node=nodes[i % 3], gpu_index=i // 3, live=True)


def _reference(snapshot: engine.Snapshot, now: datetime = NOW) -> engine.Snapshot:
    """The snapshot with every value that comes from a timestamp recomputed the previous way:
    the row's datetime as Django reads it, then `.timestamp()`, and the budget window compared
    as datetimes."""
    jobs = {str(j.pk): j for j in Job.objects.select_related("priority_class")}
    allocations = {str(a.job_id): a for a in Allocation.objects.all()}

    def spec(s: engine.JobSpec) -> engine.JobSpec:
        j = jobs[s.id]
        in_window = 0
        since = now - timedelta(seconds=j.priority_class.budget_window_s)
        if j.preemption_count and j.last_preempted_at is not None and j.last_preempted_at >= since:
            in_window = j.preemption_count
        return dataclasses.replace(s, submitted_at=j.submitted_at.timestamp(), preemptions_in_window=in_window)

    def running(r: engine.RunningJob) -> engine.RunningJob:
        a, j = allocations[r.spec.id], jobs[r.spec.id]
        started = a.started_at or a.created_at
        return dataclasses.replace(
            r, spec=spec(r.spec), started_at=started.timestamp(),
            last_checkpoint_at=j.last_checkpoint_at.timestamp() if j.last_checkpoint_at else None,
        )

    return dataclasses.replace(snapshot, pending=tuple(spec(s) for s in snapshot.pending),
                               running=tuple(running(r) for r in snapshot.running))


def check_snapshot_matches_reference() -> None:
    """Build the fleet, read the snapshot, compare it with the reference; the engine also plans
    the same from both."""
    build_fleet()
    snapshot = read_snapshot(NOW, epoch=3).snapshot
    reference = _reference(snapshot)
    assert len(snapshot.pending) == 20 and len(snapshot.running) == 6
    for got, want in zip(snapshot.pending, reference.pending, strict=True):
        assert (got.id, got.submitted_at.hex(), got.preemptions_in_window) == (
            want.id, want.submitted_at.hex(), want.preemptions_in_window)
    for got_r, want_r in zip(snapshot.running, reference.running, strict=True):
        assert got_r.started_at.hex() == want_r.started_at.hex()
        assert got_r.last_checkpoint_at == want_r.last_checkpoint_at
        assert (got_r.last_checkpoint_at is None) == (want_r.last_checkpoint_at is None)
    assert snapshot == reference
    # The fleet really exercises what it claims: NULLs, sub-second values, the window's edge.
    assert sum(r.last_checkpoint_at is None for r in snapshot.running) == 2
    assert sum(a.started_at is None for a in Allocation.objects.all()) == 3
    assert {s.preemptions_in_window > 0 for s in snapshot.pending} == {True, False}
    assert any(s.submitted_at < 0 for s in snapshot.pending)
    assert any(s.submitted_at % 1 for s in snapshot.pending)
    assert engine.schedule(snapshot, engine.SchedulerConfig()) == engine.schedule(reference, engine.SchedulerConfig())

    # The reader hands a row read exactly as last time its last spec again: still the reference
    # when nothing changed, when the budget window moved past a preemption (same rows, other
    # `now`), when a team was renamed and when a job's row changed.
    assert read_snapshot(NOW, epoch=3).snapshot == snapshot
    later = NOW + timedelta(hours=1)
    moved = read_snapshot(later, epoch=3).snapshot
    assert moved == _reference(moved, later)
    assert [s.preemptions_in_window for s in moved.pending] != [s.preemptions_in_window for s in snapshot.pending]
    Team.objects.filter(name="ml").update(name="ml-2")
    Job.objects.filter(name="j2").update(gpus=2, submitted_at=NOW - timedelta(microseconds=7))
    changed = read_snapshot(NOW, epoch=3).snapshot
    assert changed == _reference(changed, NOW)
    assert {s.team for s in changed.pending} == {"ml-2", "vision"}
    assert 2 in {s.gpus for s in changed.pending}


@pytest.mark.django_db
def test_snapshot_timestamps_equal_the_datetime_reading_on_postgresql() -> None:
    check_snapshot_matches_reference()


def check_microsecond_endings() -> None:
    """Every 6-digit fraction shape, NULL, and instants in several zones, read back through the
    function next to the datetime itself (on a fleet already built)."""
    base = datetime(2026, 11, 29, 15, 30, 12, tzinfo=UTC)
    job = Job.objects.first()
    assert job is not None
    for us in (0, 1, 9, 10, 99999, 100000, 123456, 500000, 999999):
        for at in (base + timedelta(microseconds=us), (base + timedelta(microseconds=us)).astimezone(KOLKATA)):
            Job.objects.filter(pk=job.pk).update(last_progress_at=at)
            read, seconds = Job.objects.filter(pk=job.pk).values_list("last_progress_at",
                                                                     EpochSeconds("last_progress_at")).get()
            assert seconds.hex() == read.timestamp().hex() == at.timestamp().hex()
    Job.objects.filter(pk=job.pk).update(last_progress_at=None)
    assert Job.objects.filter(pk=job.pk).values_list(EpochSeconds("last_progress_at"), flat=True).get() is None


@pytest.mark.django_db
def test_epoch_seconds_equal_timestamp_for_every_microsecond_ending() -> None:
    build_fleet()
    check_microsecond_endings()


def test_snapshot_timestamps_equal_the_datetime_reading_on_sqlite(tmp_path: Path, migrated_sqlite: Path) -> None:
    """The demo's database: a fresh SQLite file, migrated (a copy of the run's migrated file,
    tests/controlplane/conftest.py), the same fleet and the same check."""
    shutil.copyfile(migrated_sqlite, tmp_path / "snapshot.sqlite3")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'snapshot.sqlite3'}",
           "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    script = (
        "import django; django.setup()\n"
        "from django.core.management import call_command\n"
        "from django.db import connection, transaction\n"
        "call_command('migrate', verbosity=0)\n"
        "assert connection.vendor == 'sqlite', connection.vendor\n"
        "from tests.controlplane.loop.test_snapshot_epoch_seconds import (\n"
        "    check_microsecond_endings, check_snapshot_matches_reference)\n"
        "with transaction.atomic():\n"
        "    check_snapshot_matches_reference()\n"
        "    check_microsecond_endings()\n"
        "print('sqlite ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "sqlite ok" in done.stdout


def test_epoch_seconds_on_an_unsupported_database_is_refused_by_name() -> None:
    from types import SimpleNamespace

    from django.db import NotSupportedError

    with pytest.raises(NotSupportedError, match="not on mysql"):
        EpochSeconds("submitted_at").as_sql(None, SimpleNamespace(vendor="mysql"))
