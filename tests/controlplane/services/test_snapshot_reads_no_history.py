"""The cycle's snapshot reads the jobs that wait or run, never the fleet's history. Its read of
the running jobs joined each live allocation to its job, and PostgreSQL answered the join by
hashing the whole jobs table: on a big installation (107,000 jobs, 2,422 running:
bench/scale_audit.py) 54 ms of the 74-ms query went to reading every job ever run, in every
cycle. A test's few rows cannot make PostgreSQL choose that plan, so the test reads the SQL: no
query joins the allocations to the jobs; the jobs are read by their ids."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.services.snapshot import read_snapshot
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.rows_read import analysed, ended_runs, reads_of

pytestmark = pytest.mark.django_db

ENDED = 150


def test_the_snapshot_reads_the_running_jobs_not_every_job_ever_run(fleet) -> None:
    now = timezone.now()
    ml_job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(minutes=5))
    hold(ml_job, [(fleet.nodes[1], 8)], now - timedelta(minutes=5))
    vision_job = running_job(fleet.vision, gpus=4, started_at=now - timedelta(minutes=3))
    hold(vision_job, [(fleet.nodes[2], 4)], now - timedelta(minutes=3))
    waiting = f.make_job(fleet.vision, gpus=2)
    ended_runs(fleet, ENDED)
    read_snapshot(now, 1)

    context = None

    def read() -> None:
        nonlocal context
        context = read_snapshot(now, 1)

    analysed()
    rows = reads_of(read, "controlplane_job")
    with CaptureQueriesContext(connection) as queries:
        read_snapshot(now, 1)

    snapshot = context.snapshot  # type: ignore[union-attr]
    assert {r.spec.id: sum(len(p.gpu_indices) for p in r.placements) for r in snapshot.running} == {
        str(ml_job.pk): 8, str(vision_job.pk): 4}
    assert [s.id for s in snapshot.pending] == [str(waiting.pk)]
    joined = [q["sql"] for q in queries.captured_queries
              if 'FROM "controlplane_allocation"' in q["sql"] and '"controlplane_job"' in q["sql"]]
    assert joined == [], joined
    # the waiting job, the two running ones and the few the preemption budget's window asks
    # about; before, every one of the 153 jobs
    assert rows["controlplane_job"] <= 10, rows
