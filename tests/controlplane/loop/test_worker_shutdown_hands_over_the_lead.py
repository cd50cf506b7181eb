"""A loop worker stopped cleanly (SIGTERM: a deploy, an upgrade, `docker compose restart`) gives
up the lead as it exits, so a standby takes it at its next tick instead of waiting out the lease.

Until 2 Dec the lease stayed with the stopped worker until it expired (`QM_LEADER_LEASE_S`, 15 s):
on the drill of docs/operations.md, a rolling restart of two loop workers left the fleet without
a cycle from 08:39:08 to 08:39:24 (no job bound, no runtime limit enforced). The epoch still
fences: the next leader takes epoch + 1, exactly as after an expiry.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from controlplane import tasks
from controlplane.models import SchedulerLease
from controlplane.services.cycle import LEASE_NAME, acquire_lease, release_lease
from tests.controlplane.loop import chaos_cluster

pytestmark = [
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the Redis and PostgreSQL `make test` starts"),
    pytest.mark.django_db(transaction=True),  # the worker reads and writes the test database
]


def _lease() -> SchedulerLease | None:
    return SchedulerLease.objects.filter(name=LEASE_NAME).first()


def test_a_worker_stopped_with_sigterm_releases_the_lease_and_a_standby_leads_at_once(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    env = {**os.environ, "DATABASE_URL": chaos_cluster.test_database_url(),
           "DJANGO_SETTINGS_MODULE": "controlplane.settings", "PYTHONPATH": str(chaos_cluster.REPO)}
    argv = [str(chaos_cluster.BIN / "celery"), "-A", "controlplane", "worker", "-Q", "qm.loop", "-P", "solo",
            "-n", f"handover-{os.getpid()}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "--loglevel", "INFO"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, env=env, cwd=str(tmp_path), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 90  # a Celery worker's start on a loaded machine
        while not ((lease := _lease()) and lease.holder.startswith(f"handover-{os.getpid()}@")):
            assert proc.poll() is None, f"the worker exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the worker never led:\n{log.read_text()[-3000:]}"
            tasks.tick.apply_async(queue="qm.loop", expires=5)  # as beat does
            time.sleep(0.5)
        epoch = lease.epoch
        assert lease.expires_at > timezone.now() + timedelta(seconds=5)  # a live lease of QM_LEADER_LEASE_S

        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)

        released = _lease()
        assert released is not None and released.expires_at <= timezone.now(), (
            f"the stopped worker still holds the lead until {released and released.expires_at}:\n"
            f"{log.read_text()[-3000:]}")
        assert released.epoch == epoch  # giving it up is no new epoch; taking it is
        assert '"leader released the lease"' in log.read_text() or "leader released the lease" in log.read_text()
        standby = acquire_lease("standby@host/1", timezone.now())
        assert standby is not None and standby.epoch == epoch + 1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_release_lease_lets_go_only_of_a_lead_it_holds() -> None:
    now = timezone.now()
    lease = acquire_lease("a@host/1", now)
    assert lease is not None
    assert release_lease("b@host/2", now) is False  # not b's to give up
    assert acquire_lease("b@host/2", now) is None
    assert release_lease("a@host/1", now) is True
    assert release_lease("a@host/1", now) is False  # once
    taken = acquire_lease("b@host/2", now)
    assert taken is not None and taken.epoch == lease.epoch + 1 and taken.holder == "b@host/2"
