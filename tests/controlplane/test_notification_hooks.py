"""Job notifications by webhook: the outbox written with the job's events, and its sender.

A real HTTP receiver (http.server on 127.0.0.1, tests/controlplane/webhook_receiver.py) takes
the POSTs; the jobs move through the real transitions (bind, exit, stop, cancel, the cycle).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import EventKind, JobState, Role
from controlplane.models import Event, Job, Membership, NotificationDelivery, NotificationHook
from controlplane.services import cycle, notifications, transitions
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    bind,
    build_loop_fleet,
    make_job,
    register_node,
)
from tests.controlplane.webhook_receiver import LOOPBACK, Receiver, dead_url, running

ALL = ["started", "succeeded", "failed", "timed_out", "cancelled", "preempted", "requeued", "unschedulable"]


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP, "PUBLIC_URL": "https://qm.example.org",
                   "WEBHOOK_TIMEOUT_S": 0.5, "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK]}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from running()


@pytest.fixture
def alice(fleet: LoopFleet) -> Any:
    return f.make_user("alice", team=fleet.team)


def hook(user: Any, url: str, events: list[str] | None = None, **kw: Any) -> NotificationHook:
    return NotificationHook.objects.create(user=user, url=url, events=events or ALL, secret="s3cret-of-the-hook",
                                           created_at=timezone.now(), **kw)


def job_of(fleet: LoopFleet, user: Any, name: str = "train", **kw: Any) -> Job:
    return make_job(fleet, name=name, submitter=user, **kw)


def send_all() -> notifications.Sent:
    return notifications.deliver_due(now=timezone.now() + timedelta(seconds=1))


# ------------------------------------------------------------------------------ each event


def test_each_event_kind_produces_one_delivery(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    hook(alice, receiver.url)
    node, _ = register_node("n-1")
    now = timezone.now()
    # started, then succeeded
    ok = bind(job_of(fleet, alice, "ok"), {node: [0]})
    transitions.complete_release(ok.pk, exit_code=0, at=now, actor="agent:n-1")
    # failed with an exit code
    bad = bind(job_of(fleet, alice, "bad"), {node: [1]})
    transitions.complete_release(bad.pk, exit_code=3, at=now, actor="agent:n-1")
    # timed out: the runtime limit's stop, then the processes gone
    slow = bind(job_of(fleet, alice, "slow"), {node: [2]})
    transitions.signal_stop(slow.pk, slow.generation, reason=transitions.RELEASE_RUNTIME_LIMIT, grace_period_s=5,
                            at=now, actor="scheduler", message="Hit its runtime limit of 1 h")
    transitions.complete_release(slow.pk, exit_code=None, at=now, actor="agent:n-1")
    # preempted (the notice), then requeued once its processes are gone
    victim = bind(job_of(fleet, alice, "victim"), {node: [3]})
    transitions.signal_stop(victim.pk, victim.generation, reason=transitions.RELEASE_PREEMPTED, grace_period_s=30,
                            at=now, actor="scheduler@epoch:1", lost_gpu_hours=0.25,
                            message="Preempted for job 99 (priority 900 > 500): 30 s grace, about 0.25 GPU-hours "
                                    "since its last checkpoint will be lost")
    transitions.complete_release(victim.pk, exit_code=None, at=now, actor="agent:n-1")
    # cancelled while waiting, by alice
    waiting = job_of(fleet, alice, "waiting")
    assert transitions.cancel_job(waiting, "user:alice")
    # can never run: the cycle finds no node of its GPU type (and starts the requeued victim again)
    never = job_of(fleet, alice, "never", gpu_types=["B200-192GB"])
    cycle.run_cycle("worker-1")
    assert Event.objects.filter(job=never, kind=EventKind.JOB_UNSCHEDULABLE).exists()

    sent = send_all()

    got = sorted((r.json()["job_name"], r.json()["event"]) for r in receiver.received)
    assert got == sorted([
        ("ok", "started"), ("ok", "succeeded"), ("bad", "started"), ("bad", "failed"), ("slow", "started"),
        ("slow", "timed_out"), ("victim", "started"), ("victim", "preempted"), ("victim", "requeued"),
        ("victim", "started"), ("waiting", "cancelled"), ("never", "unschedulable"),
    ])  # one each (the victim started twice), none for the runtime limit's stop or the cancel's finish
    assert sent.delivered == len(got)
    by = {(r.json()["job_name"], r.json()["event"]): r.json() for r in receiver.received}
    assert by[("bad", "failed")]["exit_code"] == 3 and "exit code 3" in by[("bad", "failed")]["message"]
    assert by[("bad", "failed")]["state"] == "failed"
    assert by[("waiting", "cancelled")]["text"].startswith(f"Job {waiting.pk} waiting (ml) cancelled by alice: ")
    notice = by[("victim", "preempted")]
    assert "30 s grace" in notice["message"] and notice["grace_period_s"] == 30
    assert notice["expected_lost_gpu_hours"] == 0.25
    assert by[("ok", "started")]["url"] == f"https://qm.example.org/jobs/{ok.job_id}/"
    assert by[("ok", "started")]["state"] == "running" and by[("ok", "started")]["team"] == "ml"
    assert not NotificationDelivery.objects.filter(next_attempt_at__isnull=False).exists()


def test_a_hook_gets_only_the_events_it_subscribed_to(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    hook(alice, receiver.url, ["failed"])
    node, _ = register_node("n-1")
    for gpu, code in enumerate((0, 1)):
        allocation = bind(job_of(fleet, alice, f"j{code}"), {node: [gpu]})
        transitions.complete_release(allocation.pk, exit_code=code, at=timezone.now(), actor="agent")

    send_all()

    assert [(r.json()["job_name"], r.json()["event"]) for r in receiver.received] == [("j1", "failed")]


def test_the_signature_verifies_with_the_hook_secret(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    hook(alice, receiver.url, ["started"])
    node, _ = register_node("n-1")
    bind(job_of(fleet, alice), {node: [0]})

    send_all()

    (got,) = receiver.received
    expected = "sha256=" + hmac.new(b"s3cret-of-the-hook", got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Quartermaster-Signature"] == expected
    assert got.headers["X-Quartermaster-Event"] == "started"
    assert got.headers["Content-Type"] == "application/json"
    forged = "sha256=" + hmac.new(b"another-secret", got.body, hashlib.sha256).hexdigest()
    assert got.headers["X-Quartermaster-Signature"] != forged
    assert got.json()["text"].startswith("Job ")  # what a Slack incoming webhook shows


# ---------------------------------------------------------------------------------- retries


def test_a_receiver_answering_500_then_200_gets_it_on_the_retry(fleet: LoopFleet, alice: Any) -> None:
    for receiver in running(statuses=[500]):
        h = hook(alice, receiver.url, ["started"])
        node, _ = register_node("n-1")
        bind(job_of(fleet, alice), {node: [0]})
        now = timezone.now() + timedelta(seconds=1)

        first = notifications.deliver_due(now=now)
        row = NotificationDelivery.objects.get(hook=h)
        assert first.failed == 1 and row.attempts == 1 and row.delivered_at is None and row.last_status == 500
        assert "HTTP 500" in row.last_error
        assert row.next_attempt_at is not None and row.next_attempt_at >= now + timedelta(seconds=29)
        assert notifications.deliver_due(now=now + timedelta(seconds=10)).found_work is False  # not due yet

        second = notifications.deliver_due(now=row.next_attempt_at + timedelta(seconds=1))

        row.refresh_from_db()
        assert second.delivered == 1 and row.delivered_at is not None and row.attempts == 2
        assert row.next_attempt_at is None and row.last_error == ""
        assert len(receiver.received) == 2 and receiver.received[0].body == receiver.received[1].body
        assert receiver.received[0].headers["X-Quartermaster-Delivery"] == str(row.pk)
        h.refresh_from_db()
        assert h.consecutive_failures == 0 and h.last_status.startswith("HTTP 200")


def test_backoff_doubles_from_30_s_to_at_most_an_hour() -> None:
    assert [notifications.backoff_s(n) for n in range(1, 10)] == [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]


def test_a_dead_receiver_costs_one_timeout_a_round_and_loses_nothing(fleet: LoopFleet, alice: Any) -> None:
    for stuck in running(hang=True):
        h = hook(alice, stuck.url, ["started", "succeeded"])
        node, _ = register_node("n-1")
        for gpu in range(4):
            allocation = bind(job_of(fleet, alice, f"j{gpu}"), {node: [gpu]})
            transitions.complete_release(allocation.pk, exit_code=0, at=timezone.now(), actor="agent")
        assert NotificationDelivery.objects.filter(hook=h).count() == 8

        started = time.monotonic()
        sent = send_all()
        took = time.monotonic() - started

        assert (sent.failed, sent.postponed) == (1, 7)
        assert stuck.hung == 1, "one POST tried"
        assert took < 8 * 0.5, took  # one 0.5 s timeout, not eight
        rows = list(NotificationDelivery.objects.filter(hook=h).order_by("id"))
        assert [r.attempts for r in rows] == [1, 0, 0, 0, 0, 0, 0, 0]  # only the one tried counts an attempt
        assert all(r.delivered_at is None and r.next_attempt_at is not None for r in rows)
        assert "timed out after 0.5 s" in rows[0].last_error

    for back in running():
        NotificationHook.objects.filter(pk=h.pk).update(url=back.url)
        sent = notifications.deliver_due(now=timezone.now() + timedelta(minutes=2))
        assert sent.delivered == 8
        assert [(r.json()["job_name"], r.json()["event"]) for r in back.received] == [
            (f"j{gpu}", event) for gpu in range(4) for event in ("started", "succeeded")]


def test_a_dead_receiver_does_not_slow_the_scheduling_cycle(fleet: LoopFleet, alice: Any) -> None:
    """The cycle only writes outbox rows; no network happens in it."""
    for stuck in running(hang=True):
        hook(alice, stuck.url, ["started"])
        register_node("n-1")
        jobs = [job_of(fleet, alice, f"j{i}") for i in range(4)]
        assert cycle.run_cycle("worker-1").binds == 4
        assert NotificationDelivery.objects.filter(job__in=jobs, event="started").count() == 4
        # nothing reached the receiver (until 6 Dec this was a time bound, the cycle under 2 s,
        # four timeouts' worth, which a loaded machine's cycle alone could pass)
        assert not stuck.received and stuck.hung == 0, "the cycle sent nothing"


def test_a_hook_reads_as_failing_after_5_failed_attempts_in_a_row(fleet: LoopFleet, alice: Any) -> None:
    h = hook(alice, dead_url(), ["started"])
    node, _ = register_node("n-1")
    bind(job_of(fleet, alice), {node: [0]})
    at = timezone.now()
    for _ in range(5):
        at += timedelta(hours=2)
        notifications.deliver_due(now=at)
    h.refresh_from_db()
    failing, words = notifications.health(h)
    assert h.consecutive_failures == 5 and failing
    assert words.startswith("failing: the last 5 attempts failed (connection refused")


def test_a_delivery_is_given_up_after_the_last_attempt_and_says_so(fleet: LoopFleet, alice: Any, settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_MAX_ATTEMPTS": 3}
    h = hook(alice, dead_url(), ["started"])
    node, _ = register_node("n-1")
    bind(job_of(fleet, alice), {node: [0]})
    at = timezone.now()
    for _ in range(4):
        at += timedelta(hours=2)
        notifications.deliver_due(now=at)
    row = NotificationDelivery.objects.get(hook=h)
    assert row.attempts == 3 and row.next_attempt_at is None and row.delivered_at is None
    assert row.last_error.startswith("gave up after 3 attempts; the last: connection refused")


def test_two_senders_never_post_the_same_delivery(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    hook(alice, receiver.url, ["started"])
    node, _ = register_node("n-1")
    for gpu in range(6):
        bind(job_of(fleet, alice, f"j{gpu}"), {node: [gpu]})
    claimed_first = notifications._claim(timezone.now() + timedelta(seconds=1), 200)
    claimed_again = notifications._claim(timezone.now() + timedelta(seconds=1), 200)
    assert len(claimed_first) == 6 and claimed_again == []


# ------------------------------------------------------------------------------------- who


def test_another_users_jobs_are_not_delivered_to_you(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    bob = f.make_user("bob", team=fleet.team)
    hook(alice, receiver.url, ["started"])  # alice's own jobs only, though bob is in her team
    node, _ = register_node("n-1")
    bind(job_of(fleet, bob, "bobs"), {node: [0]})
    bind(job_of(fleet, alice, "alices"), {node: [1]})

    send_all()

    assert [r.json()["job_name"] for r in receiver.received] == ["alices"]


def test_a_team_hook_delivers_every_job_of_the_team_and_no_other(fleet: LoopFleet, alice: Any,
                                                                  receiver: Receiver) -> None:
    bob = f.make_user("bob", team=fleet.team)
    other = f.make_team("vision")
    carol = f.make_user("carol", team=other)
    hook(alice, receiver.url, ["started"], team=fleet.team)
    node, _ = register_node("n-1")
    bind(job_of(fleet, bob, "bobs"), {node: [0]})
    bind(job_of(fleet, alice, "alices"), {node: [1]})
    bind(make_job(fleet, name="unsubmitted"), {node: [2]})  # no submitter: still the team's
    foreign = make_job(fleet, name="carols", submitter=carol)
    Job.objects.filter(pk=foreign.pk).update(team=other)
    bind(foreign, {node: [3]})

    send_all()

    assert sorted(r.json()["job_name"] for r in receiver.received) == ["alices", "bobs", "unsubmitted"]


def test_a_team_hook_stops_when_its_user_leaves_the_team(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    hook(alice, receiver.url, ["started"], team=fleet.team)
    Membership.objects.filter(user=alice).delete()
    node, _ = register_node("n-1")
    bind(make_job(fleet, name="after-she-left"), {node: [0]})
    assert not NotificationDelivery.objects.exists()


def test_a_team_hook_of_an_admin_outside_the_team_delivers(fleet: LoopFleet, receiver: Receiver) -> None:
    root = f.make_user("root", role=Role.ADMIN)
    hook(root, receiver.url, ["started"], team=fleet.team)
    node, _ = register_node("n-1")
    bind(make_job(fleet, name="watched"), {node: [0]})
    assert NotificationDelivery.objects.filter(hook__user=root).count() == 1


def test_a_paused_hook_queues_nothing(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    hook(alice, receiver.url, ["started"], active=False)
    node, _ = register_node("n-1")
    bind(job_of(fleet, alice), {node: [0]})
    assert not NotificationDelivery.objects.exists()


# ------------------------------------------------------------------------------ transactions


def test_the_outbox_row_commits_with_the_event_or_not_at_all(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    hook(alice, receiver.url, ["cancelled"])
    waiting = job_of(fleet, alice)
    with pytest.raises(RuntimeError), transaction.atomic():
        transitions.cancel_job(waiting, "user:alice")
        assert NotificationDelivery.objects.count() == 1
        raise RuntimeError("the caller's transaction fails after the cancel")
    assert not NotificationDelivery.objects.exists()
    assert Job.objects.get(pk=waiting.pk).state == JobState.PENDING


# ------------------------------------------------------------------------------ query counts


def _hook_queries(queries: CaptureQueriesContext) -> int:
    tables = (NotificationHook._meta.db_table, NotificationDelivery._meta.db_table)
    return sum(1 for q in queries.captured_queries if any(t in q["sql"] for t in tables))


def test_a_batch_of_exits_costs_one_short_query_without_hooks_and_three_with(fleet: LoopFleet, alice: Any,
                                                                             receiver: Receiver) -> None:
    node, _ = register_node("n-1")
    batch = [bind(job_of(fleet, alice, f"b{i}"), {node: [i]}) for i in range(4)]
    with CaptureQueriesContext(connection) as without:
        transitions.complete_releases([(a.pk, a.generation, 0, timezone.now()) for a in batch], actor_of={})
    assert _hook_queries(without) == 1
    # every job's end comes here: without an active hook, the hook table alone is read, not its
    # join with the jobs, users, teams and memberships (~3 ms each on PostgreSQL even when empty)
    (only,) = [q["sql"] for q in without.captured_queries if NotificationHook._meta.db_table in q["sql"]]
    assert Job._meta.db_table not in only and "JOIN" not in only.upper()

    hook(alice, receiver.url, ["succeeded"])
    batch = [bind(job_of(fleet, alice, f"c{i}"), {node: [i]}) for i in range(4)]
    with CaptureQueriesContext(connection) as with_hooks:
        transitions.complete_releases([(a.pk, a.generation, 0, timezone.now()) for a in batch], actor_of={})
    assert _hook_queries(with_hooks) == 3  # any active hook, find those of these jobs, queue the 4 deliveries
    assert len(with_hooks) == len(without) + 2
    assert NotificationDelivery.objects.filter(event="succeeded").count() == 4


def test_events_nobody_can_subscribe_to_cost_no_query(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    hook(alice, receiver.url)
    with CaptureQueriesContext(connection) as queries:
        Event.objects.create(created_at=timezone.now(), kind=EventKind.NODE_REGISTERED, actor="test")
        transitions.record_event(EventKind.JOB_SUBMITTED, "user:alice", job=job_of(fleet, alice))
    assert _hook_queries(queries) == 0


# ------------------------------------------------------------------------------ the loops


@pytest.mark.django_db(transaction=True)
def test_the_embedded_sender_delivers_when_a_commit_wakes_it_not_at_its_interval(
        receiver: Receiver, settings: Any) -> None:
    # Its interval is an hour here: a delivery within the minute this waits is the wake-up's.
    # (Until 6 Dec: a 30-s interval, 0.2 s slept for its first round, and "within 1 s" asserted,
    # which a loaded machine could miss and a slow first round could pass without a wake-up.)
    from controlplane import embedded

    settings.QM = {**settings.QM, "IN_PROCESS_LOOP": True, "NOTIFY_INTERVAL_S": 3600}
    fleet = build_loop_fleet()
    alice = f.make_user("alice", team=fleet.team)
    hook(alice, receiver.url, ["started"])
    node, _ = register_node("n-1")
    loop = embedded.notification_loop()
    first_round = threading.Event()
    (deliver,) = loop.steps

    def told() -> object:
        try:
            return deliver()
        finally:
            first_round.set()

    loop.steps = [told]
    loop.start()
    try:
        assert first_round.wait(60)  # its first (empty) round is done: what follows comes from the wake-up
        bind(job_of(fleet, alice), {node: [0]})
        got = receiver.wait_for(1, timeout=60)
    finally:
        loop.stop()
        loop.join(60)
    assert [r.json()["event"] for r in got] == ["started"]


@pytest.mark.django_db(transaction=True)
def test_the_celery_task_sends_what_is_due(receiver: Receiver) -> None:
    from controlplane import tasks

    fleet = build_loop_fleet()
    alice = f.make_user("alice", team=fleet.team)
    hook(alice, receiver.url, ["started"])
    node, _ = register_node("n-1")
    bind(job_of(fleet, alice), {node: [0]}, at=timezone.now() - timedelta(seconds=1))

    assert tasks.deliver_notifications.apply().get() == "1 delivered, 0 failed"
    assert tasks.deliver_notifications.apply().get() == "nothing to do"
    assert receiver.events() == ["started"]


def test_sender_threads_are_not_left_behind(fleet: LoopFleet, alice: Any, receiver: Receiver) -> None:
    hook(alice, receiver.url, ["started"])
    node, _ = register_node("n-1")
    bind(job_of(fleet, alice), {node: [0]})
    send_all()
    assert not [t for t in threading.enumerate() if t.name.startswith("qm-webhook")]


def test_more_hooks_than_sender_threads_each_get_their_rows_in_order(fleet: LoopFleet, alice: Any) -> None:
    """12 hooks, 8 threads: every hook's rows go, one POST of a hook at a time, oldest first."""
    receivers = [running() for _ in range(12)]
    started = [next(r) for r in receivers]
    try:
        for receiver in started:
            hook(alice, receiver.url, ["started", "succeeded"])
        node, _ = register_node("n-1")
        for gpu in range(3):
            allocation = bind(job_of(fleet, alice, f"j{gpu}"), {node: [gpu]})
            transitions.complete_release(allocation.pk, exit_code=0, at=timezone.now(), actor="agent")

        sent = send_all()

        assert sent.delivered == 12 * 6 and sent.failed == 0
        for receiver in started:
            assert [(r.json()["job_name"], r.json()["event"]) for r in receiver.received] == [
                (f"j{gpu}", event) for gpu in range(3) for event in ("started", "succeeded")]
    finally:
        for r in receivers:
            r.close()


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs the Redis `make test` starts")
@pytest.mark.django_db(transaction=True)
def test_a_commit_that_queues_deliveries_sends_the_task_to_the_default_queue_once(receiver: Receiver) -> None:
    import redis
    from django.conf import settings as django_settings

    from controlplane import triggers

    broker = redis.Redis.from_url(django_settings.REDIS_URL)
    broker.flushdb()
    fleet = build_loop_fleet()
    alice = f.make_user("alice", team=fleet.team)
    node, _ = register_node("n-1")
    bind(job_of(fleet, alice, "before-any-hook"), {node: [0]})
    assert broker.llen("celery") == 0  # nothing queued, nothing to wake

    hook(alice, receiver.url, ["started"])
    for gpu in (1, 2, 3):
        bind(job_of(fleet, alice, f"j{gpu}"), {node: [gpu]})

    messages = [json.loads(raw)["headers"] for raw in broker.lrange("celery", 0, -1)]
    assert [m["task"] for m in messages] == ["qm.notify"]  # three commits within the window: one run
    assert messages[0]["eta"]
    on_the_loops_queue = [json.loads(raw)["headers"]["task"] for raw in broker.lrange("qm.loop", 0, -1)]
    assert "qm.notify" not in on_the_loops_queue  # never where the cycles run
    assert broker.pttl(triggers.NOTIFY_DEBOUNCE_KEY) > 0


def test_a_notification_queued_during_a_retry_wait_does_not_overtake_the_older_one(fleet: LoopFleet, alice: Any) -> None:
    for receiver in running(statuses=[500]):
        h = hook(alice, receiver.url, ["started", "succeeded"])
        node, _ = register_node("n-1")
        allocation = bind(job_of(fleet, alice, "first"), {node: [0]})
        now = timezone.now() + timedelta(seconds=1)
        assert notifications.deliver_due(now=now).failed == 1  # "started" waits 30 s for its retry
        transitions.complete_release(allocation.pk, exit_code=0, at=timezone.now(), actor="agent")

        assert notifications.deliver_due(now=now + timedelta(seconds=5)).found_work is False  # behind it
        sent = notifications.deliver_due(now=now + timedelta(seconds=31))

        assert sent.delivered == 2
        assert [r.json()["event"] for r in receiver.received] == ["started", "started", "succeeded"]
        assert not NotificationDelivery.objects.filter(hook=h, delivered_at=None).exists()


def test_sent_and_given_up_rows_are_pruned_after_the_keep_days_and_waiting_ones_kept(fleet: LoopFleet,
                                                                                    alice: Any) -> None:
    h = hook(alice, dead_url(), ["started"])
    long_ago = timezone.now() - timedelta(days=31)
    sent, given_up, waiting, recent = (
        NotificationDelivery.objects.create(hook=h, event="started", payload={}, created_at=at, next_attempt_at=due,
                                            delivered_at=done)
        for at, due, done in ((long_ago, None, long_ago), (long_ago, None, None), (long_ago, long_ago, None),
                              (timezone.now(), None, timezone.now())))
    assert notifications.prune(timezone.now()) == 2
    assert set(NotificationDelivery.objects.values_list("pk", flat=True)) == {waiting.pk, recent.pk}
