"""Celery entry points of the control loop. Beat triggers; the work is in services.

- `qm.tick` (beat, every CYCLE_INTERVAL_S): one scheduling cycle (services/cycle.py).
- `qm.cycle` (enqueued after commit by `triggers.request_cycle`, debounced): the same, soon after a
  submit, a job's end or a node coming back.
- `qm.reconcile` (beat, every CYCLE_INTERVAL_S): node health, lease expiry, fencing
  (services/reconcile.py).
- `qm.notify` (beat, every NOTIFY_INTERVAL_S, and enqueued after a commit that queued webhook
  deliveries by `triggers.request_notifications`): POST what the outbox owes (services/notifications.py),
  on the default queue, never the loop's, so a slow receiver never delays a cycle.

Several workers may run. Exactly one leads the cycle, by the lease row in PostgreSQL
(services/cycle.acquire_lease); a tick or trigger that lands on another worker is forwarded
once to the leader's own queue (`qm.worker.<nodename>`, which every worker consumes), so cycles
keep their pace whichever worker the broker picks. If the leader died, its lease expires and
the next worker to receive a tick takes over with a higher epoch.

Every task is idempotent and safe to run twice or late:
  - ticks expire after one interval (a late tick is dropped by Celery itself), and a tick that
    finds a cycle ran within the last half interval does nothing (duplicate);
  - a triggered cycle carries the time its debounce window closes; any cycle that read the
    database after that time has already served it, so it does nothing;
  - the cycle's own writes are compare-and-set under the lease epoch, and reconcile's are
    compare-and-set on node state and allocation generation.
Redis is only the broker: losing it (or a message) loses nothing but a trigger; the next tick
covers for it. While beat cannot send ticks at all it runs `qm.tick` and `qm.reconcile` itself
(`run_tick`, under the same lease; controlplane/beat.py).
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta
from typing import Any

import structlog
from celery import shared_task
from celery.signals import celeryd_after_setup, worker_process_shutdown, worker_ready, worker_shutdown
from django.conf import settings
from django.utils import timezone

from controlplane import triggers
from controlplane.models import SchedulerLease
from controlplane.services import reconcile, schema
from controlplane.services.cycle import LEASE_NAME, release_lease, run_cycle

log = structlog.get_logger(__name__)

WORKER_QUEUE_PREFIX = "qm.worker."

_worker_nodename: str | None = None


@celeryd_after_setup.connect
def _consume_own_queue(sender: str, instance: Any, **kwargs: Any) -> None:
    """Every worker also consumes its own queue, so ticks can be forwarded to the leader."""
    global _worker_nodename
    _worker_nodename = sender
    instance.app.amqp.queues.select_add(WORKER_QUEUE_PREFIX + sender)


@worker_shutdown.connect
@worker_process_shutdown.connect
def _hand_over_the_lead(**kwargs: Any) -> None:
    """A worker stopping cleanly (SIGTERM: a deploy, a restart) gives up the lead if it holds it,
    once its last task has ended, so a standby leads at its next tick rather than after the
    lease (services/cycle.release_lease). The process that ran the cycles holds it: the worker
    itself with `-P solo`, its pool's process with `-c 1`. A worker killed outright cannot: its
    lease runs out (QM_LEADER_LEASE_S)."""
    try:
        release_lease(holder_name())
    except Exception as error:  # noqa: BLE001 - the database is away: the lease runs out by itself
        log.warning("could not release the lease at shutdown; it runs out by itself", error=str(error))


@worker_ready.connect
def _say_if_the_schema_is_behind(**kwargs: Any) -> None:
    """Started on code newer than the database (an upgrade whose `migrate` has not run yet):
    say so once, naming the migrations, rather than only fail wherever the code touches them."""
    try:
        pending = schema.unapplied_migrations()
    except Exception as error:  # noqa: BLE001 - the database is away: the tasks will say so
        log.warning("could not compare the database schema with this code", error=str(error))
        return
    if pending:
        log.error("database schema is behind this code: it fails where it touches what these add; "
                  "run `python manage.py migrate` (docs/operations.md, Upgrading a running system)",
                  unapplied=pending)


def holder_name() -> str:
    """This process as a lease holder: the worker's nodename (its queue) and the pid."""
    return f"{_worker_nodename or socket.gethostname()}/{os.getpid()}"


def _queue_of(holder: str) -> str | None:
    nodename, _, _ = holder.rpartition("/")
    return WORKER_QUEUE_PREFIX + nodename if nodename and "@" in nodename else None


def _interval() -> float:
    return float(settings.QM["CYCLE_INTERVAL_S"])


# ------------------------------------------------------------------------------------- tasks


@shared_task(name="qm.tick", ignore_result=True)
def tick(forwarded: bool = False) -> str:
    """Beat's heartbeat of the loop."""
    return run_tick(forwarded=forwarded)


def run_tick(*, forwarded: bool = False, holder: str | None = None) -> str:
    """What `qm.tick` does, as `holder` (this process, by default). Beat calls it itself, as
    its own holder, while it cannot send ticks (controlplane/beat.py)."""
    now = timezone.now()
    return _cycle_step(not_before=now - timedelta(seconds=_interval() / 2), forwarded=forwarded, kind="tick",
                       holder=holder)


@shared_task(name="qm.cycle", ignore_result=True)
def cycle(requested_at: float, forwarded: bool = False) -> str:
    """A triggered cycle; `requested_at` is when its debounce window closed."""
    not_before = datetime.fromtimestamp(requested_at, tz=timezone.get_current_timezone())
    return _cycle_step(not_before=not_before, forwarded=forwarded, kind="cycle", requested_at=requested_at)


@shared_task(name="qm.reconcile", ignore_result=True)
def reconcile_nodes() -> str:
    result = reconcile.reconcile_nodes()
    return "found work" if result.found_work else "nothing to do"


@shared_task(name="qm.notify", ignore_result=True)
def deliver_notifications() -> str:
    from controlplane.services import notifications

    sent = notifications.deliver_due()
    return f"{sent.delivered} delivered, {sent.failed} failed" if sent.found_work else "nothing to do"


def _cycle_step(*, not_before: datetime, forwarded: bool, kind: str, requested_at: float | None = None,
                holder: str | None = None) -> str:
    """Run a cycle here if this process leads or may take the lead; else forward it once."""
    lease = SchedulerLease.objects.filter(name=LEASE_NAME).values("holder", "expires_at", "last_cycle_at").first()
    now = timezone.now()
    me = holder or holder_name()
    if lease and lease["last_cycle_at"] and lease["last_cycle_at"] >= not_before:
        return "already served"
    if lease and lease["holder"] and lease["holder"] != me and lease["expires_at"] and lease["expires_at"] > now:
        queue = _queue_of(lease["holder"])
        if forwarded or queue is None:
            return "led elsewhere"
        kwargs: dict[str, Any] = {"forwarded": True}
        if requested_at is not None:
            kwargs["requested_at"] = requested_at
        task = cycle if kind == "cycle" else tick
        try:
            task.apply_async(kwargs=kwargs, queue=queue, expires=_interval() * 2, retry=False)
        except Exception as error:  # noqa: BLE001 - the broker is down: the next tick covers it
            log.warning("could not forward cycle to the leader", queue=queue, error=str(error))
            return "forward failed"
        return "forwarded"
    result = run_cycle(me)
    if not result.led:
        return "not leader"
    if result.binds >= int(settings.QM.get("MAX_PLACEMENTS_PER_CYCLE", 4096)):
        # The cycle hit its placement cap: more may fit right now, so do not wait for a tick.
        triggers.request_cycle()
    return f"led epoch {result.epoch}: {result.binds} binds, {result.stops} stops"


