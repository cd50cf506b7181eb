"""The workers' broker consumer: Celery's own, with three changes for a broker outage.

* **The lead is given up when the broker goes.** A loop worker that loses Redis receives no
  more ticks, but until 3 Dec it kept the scheduler's lead until its lease ran out
  (``QM_LEADER_LEASE_S``, 15 s), and nothing was scheduled meanwhile: beat, which runs the loop
  itself while it cannot send (controlplane/beat.py), found the lead taken. Now the worker
  releases it as soon as its connection breaks (services/cycle.release_worker_lease), and beat, or
  a worker that still reaches the broker, leads at its next tick with epoch + 1. A cycle of ours
  still committing is then refused at its commit, as after any change of leader.
* **It outlives a close that fails.** kombu could raise while closing the broken connection
  (restoring a message whose ack had just failed), and the worker exited.
* **It reconnects every ``QM_BROKER_RETRY_S``** (1 s), not after Celery's growing waits (2 s
  more per attempt, up to 30 s): after a 45-s outage a worker came back 11 s after Redis did,
  and cycles waited for it.

Set by ``CELERY_WORKER_CONSUMER`` (settings.py), for every worker.
"""

from __future__ import annotations

import functools
from typing import Any

import structlog
from celery.worker.consumer import Consumer as CeleryConsumer
from django.conf import settings
from django.db import connection

log = structlog.get_logger(__name__)


class Consumer(CeleryConsumer):
    def on_connection_error_after_connected(self, exc: Exception) -> None:
        self._give_up_the_lead(exc)
        self._close_what_is_left()
        super().on_connection_error_after_connected(exc)

    def _close_what_is_left(self) -> None:
        """Close the broken connection before Celery does. Celery closes it ignoring only
        connection errors, and kombu 5.7's close, restoring a message still unacknowledged (a
        tick whose ack just failed), read the connection's address after it was gone: an
        AttributeError, "Unrecoverable error", and the worker exited. The message stays in
        Redis's unacknowledged set, which kombu restores after its visibility timeout; an
        expired tick is then dropped."""
        connection = self.connection
        if connection is None:
            return
        try:
            connection.close()
        except Exception as error:  # noqa: BLE001 - the worker must outlive a broken broker connection
            log.warning("broker connection not closed cleanly; the worker goes on", worker=self.hostname,
                        error=f"{type(error).__name__}: {error}")

    def ensure_connected(self, conn: Any) -> Any:
        every = float(settings.QM["BROKER_RETRY_S"])
        # Celery passes no intervals (kombu's defaults: 2 s, then 2 s more each attempt, up to 30 s)
        conn.ensure_connection = functools.partial(
            conn.ensure_connection, interval_start=every, interval_step=0, interval_max=every)
        return super().ensure_connected(conn)

    def _give_up_the_lead(self, exc: Exception) -> None:
        from controlplane.services.cycle import release_worker_lease

        try:
            if release_worker_lease(self.hostname):
                log.warning("broker connection lost: gave up the scheduler's lead", worker=self.hostname,
                            error=repr(exc))
        except Exception as error:  # noqa: BLE001 - the database is away too: the lease runs out by itself
            log.warning("broker connection lost; could not give up the lead, it runs out by itself",
                        worker=self.hostname, error=str(error))
        finally:
            # this process may fork pool processes later: they must not share its socket
            connection.close()
