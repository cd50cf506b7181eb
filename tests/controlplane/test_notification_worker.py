"""Webhooks end to end through a real Celery worker process.

The other webhook tests call `deliver_due` (or the task) in the test's own process. Here a real
`celery -A controlplane worker` (solo pool, the default queue only) runs against the test
database pytest-django created and the test Redis that scripts/test-services.sh started. A job's
bind commits its `job.bound` event and the outbox row in one transaction; the commit wakes the
sender through the broker (`triggers.request_notifications`: a debounced `qm.notify`), the worker
POSTs to the real local receiver and writes the outcome. A failing receiver's row records the
attempt and its backoff; the retry is the next `qm.notify` once that backoff has passed (beat's
job: the test sends the task itself after moving the row's due time, instead of waiting 30 s).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from controlplane import tasks
from controlplane.models import NotificationDelivery, NotificationHook
from controlplane.services import notifications
from tests.controlplane import factories as f
from tests.controlplane.loop import chaos_cluster
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    bind,
    build_loop_fleet,
    make_job,
    register_node,
)
from tests.controlplane.webhook_receiver import LOOPBACK, Receiver, running

pytestmark = [
    pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the Redis and PostgreSQL `make test` starts"),
    pytest.mark.django_db(transaction=True),  # the worker reads what this process committed
]

SECRET = "s3cret-of-the-hook"


@pytest.fixture(scope="module")
def worker(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One worker process for the module, on the test database; killed (its whole process group)
    at the end whatever happened. Yields its log file."""
    log_path = tmp_path_factory.mktemp("notify-worker") / "worker.log"
    env = {
        **os.environ,
        "DATABASE_URL": chaos_cluster.test_database_url(),
        "DJANGO_SETTINGS_MODULE": "controlplane.settings",
        "PYTHONPATH": str(chaos_cluster.REPO),
        "QM_WEBHOOK_ALLOWED_NETWORKS": LOOPBACK,  # the receiver is on 127.0.0.1
        "QM_WEBHOOK_TIMEOUT_S": "2",
        "QM_LOG_FORMAT": "json",
        "QM_LOG_LEVEL": "INFO",
    }
    argv = [str(chaos_cluster.BIN / "celery"), "-A", "controlplane", "worker", "-P", "solo", "-c", "1", "-Q", "celery",
            "-n", f"notifytest-{os.getpid()}@%h", "--without-gossip", "--without-mingle", "--without-heartbeat",
            "-l", "INFO"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, env=env, cwd=str(chaos_cluster.REPO), stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 90  # a Celery worker's start on a loaded machine
        while " ready." not in log_path.read_text(errors="replace"):
            assert proc.poll() is None, f"the worker exited {proc.returncode}:\n{log_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the worker was not ready in 90 s:\n{log_path.read_text()[-3000:]}"
            time.sleep(0.1)
        yield log_path
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # warm shutdown: it finishes the task at hand
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK]}


@pytest.fixture
def fleet() -> LoopFleet:
    return build_loop_fleet()


def until(condition: Callable[[], Any], timeout: float, what: str, worker: Path) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := condition():
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what} not seen in {timeout:g} s; the worker's log:\n{worker.read_text()[-3000:]}")


def start_a_job(fleet: LoopFleet, receiver: Receiver) -> tuple[NotificationHook, int]:
    """Alice's hook on the receiver, and her job bound (its `started` notification committed)."""
    alice = f.make_user("alice", team=fleet.team)
    hook = NotificationHook.objects.create(user=alice, url=receiver.url, events=["started", "succeeded"],
                                           secret=SECRET, created_at=timezone.now())
    node, _ = register_node("n-1")
    job = make_job(fleet, name="train", submitter=alice)
    bind(job, {node: [0]})
    return hook, job.pk


def test_a_worker_process_posts_the_signed_notification_and_marks_it_delivered(
        worker: Path, fleet: LoopFleet) -> None:
    for receiver in running():
        hook, job_id = start_a_job(fleet, receiver)
        # Woken by the commit: no beat runs here (the worker has no -B), so any delivery is the
        # commit's wake-up (sent with a half-second debounce). No tighter time bound: on a
        # loaded 2-core host the worker once took 10.2 s to POST it.
        (got,) = receiver.wait_for(1, timeout=60)
        row = until(lambda: NotificationDelivery.objects.filter(hook=hook, delivered_at__isnull=False).first(),
                    60, "the delivery marked delivered", worker)

    assert got.headers["X-Quartermaster-Signature"] == "sha256=" + hmac.new(
        SECRET.encode(), got.body, hashlib.sha256).hexdigest()
    forged = "sha256=" + hmac.new(b"another-secret", got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Quartermaster-Signature"] != forged
    assert got.headers["X-Quartermaster-Event"] == "started"
    assert got.headers["X-Quartermaster-Delivery"] == str(row.pk)
    assert got.json()["job_id"] == job_id and got.json()["event"] == "started"
    assert row.attempts == 1 and row.last_status == 200 and row.next_attempt_at is None and row.last_error == ""
    hook.refresh_from_db()
    assert hook.consecutive_failures == 0 and hook.last_status.startswith("HTTP 200 at ")
    assert "] succeeded in " in worker.read_text() and ": '1 delivered, 0 failed'" in worker.read_text()


def test_a_failing_receiver_is_retried_by_the_worker_with_the_backoff_recorded(
        worker: Path, fleet: LoopFleet) -> None:
    for receiver in running(statuses=[503]):
        hook, _ = start_a_job(fleet, receiver)

        (first,) = receiver.wait_for(1, timeout=60)
        row = until(lambda: NotificationDelivery.objects.filter(hook=hook, attempts=1).first(), 60,
                    "the failed attempt recorded", worker)
        assert row.delivered_at is None and row.last_status == 503
        assert row.last_error == "HTTP 503: receiver says no"
        hook.refresh_from_db()
        attempted_at = hook.last_delivery_at
        assert attempted_at is not None and hook.consecutive_failures == 1
        assert row.next_attempt_at == attempted_at + timedelta(seconds=notifications.backoff_s(1))  # 30 s
        time.sleep(1.5)  # a second wake-up now (the debounce is over) finds nothing due: not retried early
        ran = worker.read_text().count("nothing to do'")
        tasks.deliver_notifications.apply_async()
        # the worker has run it (slept for before: on a loaded machine it might not have yet, and
        # nothing received proved nothing)
        until(lambda: worker.read_text().count("nothing to do'") > ran, 60, "the second wake-up run", worker)
        assert len(receiver.received) == 1

        # The 30 s have passed (moved, not waited): beat's next qm.notify retries it.
        NotificationDelivery.objects.filter(pk=row.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))
        tasks.deliver_notifications.apply_async()

        first_again, second = receiver.wait_for(2, timeout=60)
        row = until(lambda: NotificationDelivery.objects.filter(pk=row.pk, delivered_at__isnull=False).first(),
                    60, "the retried delivery marked delivered", worker)

    assert first_again is first
    assert second.body == first.body  # the same notification, the same signature
    assert second.headers["X-Quartermaster-Delivery"] == first.headers["X-Quartermaster-Delivery"] == str(row.pk)
    assert second.headers["X-Quartermaster-Signature"] == notifications.sign(SECRET, second.body)
    assert row.attempts == 2 and row.last_status == 200 and row.next_attempt_at is None and row.last_error == ""
    hook.refresh_from_db()
    assert hook.consecutive_failures == 0
