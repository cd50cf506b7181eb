"""Row locks taken to change a job's, allocation's or node's state are FOR NO KEY UPDATE.

Inserting a row that references a job (an event, a usage rollup) takes FOR KEY SHARE on that job
row. FOR UPDATE conflicts with it, so an agent's report locking jobs in one order and the
accounting rollup inserting rows for jobs in another deadlocked (seen under the /bin/true bench).
State changes never touch a key, so they lock FOR NO KEY UPDATE, which such inserts do not wait
for and which does not wait for them.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Job
from controlplane.services import transitions
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import h100, hold, node, running_job

pytestmark = pytest.mark.django_db(transaction=True)


def _hold_key_share_on(job: Job, holding: threading.Event, release: threading.Event) -> None:
    """Another transaction inserts a row referencing `job` and stays open until released."""
    try:
        with transaction.atomic():
            # Django's foreign keys are checked at commit; a commit checking many (the rollup's)
            # holds each job's KEY SHARE lock while it checks the rest. Check at once to hold it here.
            with connection.cursor() as cursor:
                cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
            transitions.record_event(EventKind.JOB_SUBMITTED, "test", job=job, at=timezone.now(),
                                     reason="Test", message="a row that references the job")
            holding.set()
            release.wait(10)
    finally:
        connections.close_all()


def test_job_release_does_not_wait_for_a_transaction_referencing_the_job() -> None:
    now = timezone.now()
    gpu = h100()
    job = running_job(f.make_team("ml"), gpus=8, started_at=now - timedelta(minutes=5))
    allocation = hold(job, [(node(gpu), 8)], now - timedelta(minutes=5))
    holding, release = threading.Event(), threading.Event()
    other = threading.Thread(target=_hold_key_share_on, args=(job, holding, release))
    other.start()
    try:
        assert holding.wait(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = '2s'")
        # before: FOR UPDATE on the allocation's job waited for the other transaction → lock timeout
        assert transitions.complete_release(allocation.pk, exit_code=0, at=now, actor="agent:test")
    finally:
        release.set()
        other.join(10)
        with connection.cursor() as cursor:
            cursor.execute("SET lock_timeout = 0")
    job.refresh_from_db()
    assert job.state == "succeeded"
