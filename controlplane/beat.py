"""Celery beat's scheduler: it sends the loop's ticks, and runs them itself while the broker is away.

Redis is only the broker, yet with it away beat could send no `qm.tick` or `qm.reconcile` and
no worker could receive one: nothing was scheduled, no runtime limit enforced, no dead node
fenced until Redis came back. Beat is the process that notices (each send fails), so it covers
for the workers:

- a loop entry (`qm.tick`, `qm.reconcile`) whose send fails for want of a broker connection is
  run here instead: the same function a worker runs (`tasks.run_tick`,
  `reconcile.reconcile_nodes`), one at a time on one thread of its own, beat waiting for it at
  most one interval (`QM_CYCLE_INTERVAL_S`) before it goes on; an entry that falls due while
  one still runs is skipped, as a late tick is;
- the cycle runs under the PostgreSQL leader lease as a worker's does, as holder
  `beat:<host>/<pid>`: it leads only once no worker holds a live lease (the leader, getting no
  ticks, lets its lease run out within QM_LEADER_LEASE_S) and then with epoch + 1, so a worker
  cycle still in flight is refused at its commit (`Deposed`), and beat's own cycles are
  refused once a worker takes the lead again. It never forwards (there is no broker to
  forward through). Reconcile needs no lead (services/reconcile.py: its writes only move
  allocations towards fenced);
- it says so once per outage (`loop tick run in beat: broker unreachable`), not at every tick,
  and once when a send gets through again (`broker reachable again: loop ticks go to the
  workers`): it then sends as before, runs nothing itself, and gives up the lead it held
  (`cycle.release_lease`) so a worker leads at its next tick rather than after the lease.

- `qm.notify` (the webhook deliveries due) and the accounting runs (`qm.accounting.roll_up`,
  `qm.accounting.retention`, `qm.accounting.remember_job_costs`) are run here the same way, each on a thread of its own that beat
  does not wait for: a receiver slow to answer or a long rollup holds up neither beat nor the
  loop's runs. Each is safe beside a worker's run once the broker is back: deliveries are
  claimed in PostgreSQL (`notifications.deliver_due`), a rollup locks the accounting cursor and
  a second one skips, two runs remembering the same job's cost write the same row.

The one other entry, `qm.frontend.keep_team_days`, stores the teams page's days in Redis: it
waits for the broker. Every send is one attempt, and during an outage beat sends
nothing, and opens no broker connection, until the broker answers a PING, asked PROBE_S after
the last one ended (a broker that drops packets made each send, and each connection tried,
wait out the socket timeout). The Redis uses on
the way (the debounce of triggers, agent wake-ups, notification triggers) already fail soft: a
log line, and agents learn of their work at their heartbeat.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import Any

import structlog
from celery import beat as celery_beat
from celery.beat import PersistentScheduler, ScheduleEntry

log = structlog.get_logger(__name__)

#: How often beat asks whether the broker answers during an outage, and how long it waits for
#: the answer (meanwhile the loop's entries run here and the others wait).
PROBE_S = 2.0

#: Entries run on a thread of their own that beat does not wait for (the others share the
#: loop's), each with the function a worker runs for it.
OWN_LANE = {
    "qm.notify": "controlplane.tasks.deliver_notifications",
    "qm.accounting.roll_up": "controlplane.tasks_accounting.roll_up_usage",
    "qm.accounting.retention": "controlplane.tasks_accounting.apply_usage_retention",
    "qm.accounting.remember_job_costs": "controlplane.tasks_accounting.remember_job_costs",
}

#: The entries beat runs itself when it cannot send them.
RUN_HERE = ("qm.tick", "qm.reconcile", *OWN_LANE)


def beat_holder() -> str:
    """Beat as a lease holder. No `@` in the part before the slash: a worker never takes it for
    a worker's queue to forward to (tasks._queue_of), it says "led elsewhere" meanwhile."""
    return f"beat:{socket.gethostname()}/{os.getpid()}"


def broker_unreachable(error: BaseException, connection_errors: tuple[type[BaseException], ...] = ()) -> bool:
    """Whether a failed send failed for want of a broker (refused, reset, timed out, unknown
    host), looking through the exceptions it was raised from (Celery wraps the send's error in
    a SchedulingError)."""
    from kombu.exceptions import OperationalError

    kinds: tuple[type[BaseException], ...] = (OperationalError, OSError, *connection_errors)
    seen: BaseException | None = error
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def run_loop_task(task: str, holder: str) -> str:
    """An entry of RUN_HERE as a worker runs it, on a database connection of its own, closed
    when it ends: beat keeps no idle connection once the outage is over."""
    from django.db import connections
    from django.utils.module_loading import import_string

    from controlplane import tasks
    from controlplane.services import reconcile

    try:
        if task == "qm.tick":
            # forwarded=True: never forward (no broker); a live lease elsewhere is "led elsewhere".
            return tasks.run_tick(forwarded=True, holder=holder)
        if task == "qm.reconcile":
            return "found work" if reconcile.reconcile_nodes().found_work else "nothing to do"
        if task in OWN_LANE:
            return str(import_string(OWN_LANE[task])())
        raise ValueError(f"beat does not run {task}")
    finally:
        connections.close_all()


LOOP_LANE = "loop"


def _said(task: str, run: Future[str]) -> None:
    """The outcome of a run beat did not wait for, in its log."""
    failed = run.exception()
    if failed is not None:
        log.warning("loop task in beat failed", task=task, error=f"{type(failed).__name__}: {failed}")
    else:
        log.debug("loop task ran in beat", task=task, outcome=run.result())


class _LoopThread:
    """One daemon thread that runs beat's loop tasks one after another, each on the thread's own
    database connection. A daemon: a run stuck on the database never holds up beat's exit."""

    def __init__(self, runner: Callable[[str, str], str], name: str = "qm-beat-loop") -> None:
        self._runner = runner
        self._jobs: queue.SimpleQueue[tuple[Future[str], str, str]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def submit(self, task: str, holder: str) -> Future[str]:
        future: Future[str] = Future()
        self._jobs.put((future, task, holder))
        return future

    def _serve(self) -> None:
        while True:
            future, task, holder = self._jobs.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(self._runner(task, holder))
            except BaseException as error:  # noqa: BLE001 - handed to the waiting scheduler
                future.set_exception(error)


class LoopScheduler(PersistentScheduler):
    """Celery's persistent scheduler, that runs the loop's entries itself while it cannot send
    them (see the module's docstring). Configured by CELERY_BEAT_SCHEDULER."""

    #: What runs a loop entry here (a test may replace it); called on the scheduler's thread.
    runner: Callable[[str, str], str] = staticmethod(run_loop_task)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.holder = beat_holder()
        self._outage_since: float | None = None  # monotonic, while sends fail
        self._outage_runs = 0
        self._outage_skipped = 0
        self._ran_here = False  # whether this beat ever ran a cycle (may hold the lease)
        self._hand_back_pending = False  # the broker is back: give up the lead once no run is in flight
        # per lane (the loop's, or an OWN_LANE entry's): the run in flight, its task, its thread
        self._running: dict[str, Future[str]] = {}
        self._running_task: dict[str, str] = {}
        self._threads: dict[str, _LoopThread] = {}
        self._connect_error: BaseException | None = None
        self._outage_error: BaseException | None = None
        self._probed_at = 0.0  # monotonic: when the last PING of the broker during an outage ended
        self._broker_back = False  # that PING was answered, and no send or connection failed since
        super().__init__(*args, **kwargs)

    # ---------------------------------------------------------------------------- sending

    @property  # type: ignore[override]
    def producer(self) -> Any:
        """The producer beat sends with, or None while the broker cannot be reached. Celery's
        own connects with `broker_connection_max_retries` (None here: forever), so a beat
        started while Redis is away never ticked at all; this tries once per due entry, and
        during an outage only once the broker answered a PING (`_broker_back_yet`): Celery asks
        for the producer before every due entry, and against a broker that drops packets each
        try waited out the socket timeout (3 s; until 6 Dec beat so ran an entry every 3-5 s
        when it had no connection from before the outage, its own loop ticks among them)."""
        producer = self.__dict__.get("_qm_producer")
        if producer is None:
            if self._outage_since is not None and not self._broker_back_yet():
                return None
            try:
                self.connection.ensure_connection(max_retries=0)
                producer = self.Producer(self.connection, auto_declare=False)
            except Exception as error:  # noqa: BLE001 - the broker is away: the entry says so
                self._connect_error = error
                self._broker_back = False
                return None
            self.__dict__["_qm_producer"] = producer
            self._connect_error = None
        return producer

    def apply_async(self, entry: ScheduleEntry, producer: Any = None, advance: bool = True, **kwargs: Any) -> Any:
        # One attempt per send: a periodic send that fails is the next period's, and kombu's
        # retries (four attempts, each waiting out the socket timeout against a broker that
        # stopped answering) held beat for 20 s and more per due entry.
        entry.options.setdefault("retry", False)
        return super().apply_async(entry, producer=producer, advance=advance, **kwargs)

    def apply_entry(self, entry: ScheduleEntry, producer: Any = None) -> None:
        if self._outage_since is not None and not self._broker_back_yet():
            # During an outage a send is tried only once the broker answers a PING, asked at
            # most once per PROBE_S: against a broker that drops packets each send waits out the
            # socket timeout and redis-py's retries (20 s), and beat waited that long for every
            # due entry before it ran a loop task. The others wait, as a failed send would.
            if entry.task in RUN_HERE:
                self._run_here(entry, self._outage_error or ConnectionError("no connection to the broker"))
            return
        if entry.task not in RUN_HERE:
            super().apply_entry(entry, producer=producer)
            return
        if entry.task in OWN_LANE:
            # said as Celery's scheduler says it of the entries it sends itself (the loop's
            # entries, due every few seconds, go unsaid)
            celery_beat.logger.info("Scheduler: Sending due task %s (%s)", entry.name, entry.task)
        if producer is None:
            self._run_here(entry, self._connect_error or ConnectionError("no connection to the broker"))
            return
        try:
            self.apply_async(entry, producer=producer, advance=False)
        except Exception as error:  # noqa: BLE001 - whatever failed, beat goes on
            if broker_unreachable(error, tuple(self.connection.connection_errors)):
                self._run_here(entry, error)
            else:
                log.error("loop tick not sent", task=entry.task, error=f"{type(error).__name__}: {error}")
            return
        self._sent()
        self._maybe_hand_back()

    def _sent(self) -> None:
        """A loop entry was sent: if beat was covering for the broker, it stops, and hands the
        lead back so a worker leads at its next tick."""
        if self._outage_since is None:
            return
        log.warning("broker reachable again: loop ticks go to the workers",
                    outage_s=round(time.monotonic() - self._outage_since, 1), runs_in_beat=self._outage_runs,
                    skipped=self._outage_skipped)
        self._outage_since = None
        self._outage_runs = self._outage_skipped = 0
        self._hand_back_pending = self._ran_here
        self._maybe_hand_back()

    def _maybe_hand_back(self) -> None:
        """Give the lead back once no run of beat's is in flight: one still running could
        otherwise take the lead again right after (with epoch + 1), and a worker would wait out
        its lease."""
        if self._hand_back_pending and self._loop_idle():
            self._hand_back_pending = False
            self._hand_back_the_lead()

    def _loop_idle(self) -> bool:
        """No run of the loop's (a tick or a reconcile) in flight."""
        running = self._running.get(LOOP_LANE)
        return running is None or running.done()

    def _hand_back_the_lead(self) -> None:
        from controlplane.services.cycle import release_lease

        try:
            release_lease(self.holder)
        except Exception as error:  # noqa: BLE001 - the database is away: the lease runs out by itself
            log.warning("could not release beat's lease; it runs out by itself", error=str(error))

    # ----------------------------------------------------------------------- running here

    def _broker_back_yet(self) -> bool:
        """During an outage, whether a send (or a connection) may be tried: the broker answered
        the last PING and nothing failed since. A PING is asked at most once per PROBE_S,
        counted from the end of the last: one the broker never answers lasts PROBE_S itself,
        and counted from its start (until 6 Dec) the next fell due at the very next entry."""
        if time.monotonic() - self._probed_at >= PROBE_S:
            self._broker_back = self._broker_answers()
            self._probed_at = time.monotonic()
        return self._broker_back

    def _broker_answers(self) -> bool:
        """One PING of the broker: no retry, PROBE_S at most."""
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        url = self.app.conf.broker_url
        if not str(url).startswith(("redis://", "rediss://")):
            return True  # not Redis: the send itself tells
        client = redis.Redis.from_url(url, socket_timeout=PROBE_S, socket_connect_timeout=PROBE_S,
                                      retry=Retry(NoBackoff(), 0))
        try:
            return bool(client.ping())
        except (redis.RedisError, OSError):
            return False
        finally:
            client.close()

    def _run_here(self, entry: ScheduleEntry, error: BaseException) -> None:
        self._outage_error = error
        self._broker_back = False  # a send was not tried, or failed: ask the broker again first
        if self._outage_since is None:
            self._outage_since = time.monotonic()
            self._probed_at = self._outage_since
            self._hand_back_pending = False
            log.warning("loop tick run in beat: broker unreachable", task=entry.task, holder=self.holder,
                        error=f"{type(error).__name__}: {error}")
        lane = entry.task if entry.task in OWN_LANE else LOOP_LANE
        running = self._running.get(lane)
        if running is not None and not running.done():
            self._outage_skipped += 1
            log.debug("loop task skipped in beat: the last one still runs", task=entry.task,
                      running=self._running_task[lane])
            return
        if entry.task == "qm.tick":
            self._ran_here = True
        self._outage_runs += 1
        self._running_task[lane] = entry.task
        thread = self._threads.get(lane)
        if thread is None:
            thread = self._threads[lane] = _LoopThread(self.runner, name=f"qm-beat-{lane}")
        running = self._running[lane] = thread.submit(entry.task, self.holder)
        if lane != LOOP_LANE:
            running.add_done_callback(partial(_said, entry.task))
            return
        bound = self._bound()
        try:
            outcome = running.result(timeout=bound)
        except FutureTimeout:
            log.warning("loop task in beat still runs; beat goes on and runs no other until it ends",
                        task=entry.task, waited_s=bound)
        except Exception as failed:  # noqa: BLE001 - the database is away, say: the next entry tries again
            log.warning("loop task in beat failed", task=entry.task, error=f"{type(failed).__name__}: {failed}")
        else:
            log.debug("loop task ran in beat", task=entry.task, outcome=outcome)

    @staticmethod
    def _bound() -> float:
        """How long beat waits for a run before it goes on: one interval of the loop."""
        from django.conf import settings

        return max(0.1, float(settings.QM["CYCLE_INTERVAL_S"]))

    # --------------------------------------------------------------------------- closing

    def close(self) -> None:
        """At beat's exit: give up the lead if beat holds it, so a worker leads at once when the
        broker returns; a run still in flight is left to end (its commit is fenced anyway)."""
        try:
            if self._ran_here and self._loop_idle():
                self._hand_back_the_lead()  # a run still in flight: its lease runs out by itself
        finally:
            producer = self.__dict__.pop("_qm_producer", None)
            del producer
            super().close()
