"""A run's start is written whole: its JOB_STARTED event and the allocation's `started_at` in one
transaction, and a report sent again (the agent resends whatever it has no reply to) adds
nothing twice (PostgreSQL; the second statement refused once by a trigger, as
test_agent_contact_half_written.py refuses an event).

Until 5 Dec `_flush_started` wrote the event and then `started_at`, each committed on its own. A
failure between them (the database going away, a statement refused) left the event without
`started_at`; the agent then sent its report again and
- a single-node run got a second "Generation … started" event (it was deduplicated by
  `started_at`, still empty);
- a gang's last member found its own event already there, took the report for a resend, and
  `started_at` was never written: no runtime limit counted, no start on the job page."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Allocation, Event
from controlplane.services import agent_protocol
from controlplane.services.agent_protocol import Report
from tests.controlplane.loop_fixtures import LoopFleet, bind, build_loop_fleet, make_job, register_node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def fleet() -> LoopFleet:
    return build_loop_fleet()


@pytest.fixture
def refuse_start_once() -> Iterator[callable]:  # type: ignore[valid-type]
    """Make the write of an allocation's `started_at` fail (until `allow()`)."""
    made: list[bool] = []

    def refuse() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE FUNCTION qa_refuse_start() RETURNS trigger AS $$ BEGIN "
                "IF OLD.started_at IS NULL AND NEW.started_at IS NOT NULL THEN "
                "RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql")
            cursor.execute("CREATE TRIGGER qa_refuse_start BEFORE UPDATE ON controlplane_allocation "
                           "FOR EACH ROW EXECUTE FUNCTION qa_refuse_start()")
        made.append(True)

    def allow() -> None:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER qa_refuse_start ON controlplane_allocation")
            cursor.execute("DROP FUNCTION qa_refuse_start()")
        made.pop()

    refuse.allow = allow  # type: ignore[attr-defined]
    yield refuse
    if made:
        allow()


def _started(allocation: Allocation) -> list[tuple[int, str]]:
    return list(Event.objects.filter(allocation=allocation, kind=EventKind.JOB_STARTED)
                .order_by("id").values_list("node_id", "message"))


def test_a_single_node_start_that_fails_halfway_is_written_once_when_sent_again(fleet, refuse_start_once) -> None:
    node, _ = register_node("start-0")
    job = make_job(fleet, gpus=2)
    allocation = bind(job, {node: [0, 1]})
    at = timezone.now()
    started = Report(kind="started", generation=allocation.generation, at=at)
    refuse_start_once()

    with pytest.raises(DatabaseError):
        agent_protocol.sync(node, reports=[started], running=[allocation.generation], renew=False, now=at)

    # nothing of the start: no event without its started_at
    assert _started(allocation) == []
    assert Allocation.objects.get(pk=allocation.pk).started_at is None

    refuse_start_once.allow()  # type: ignore[attr-defined]
    for _ in range(2):  # the agent sends it again, and once more (its reply lost)
        agent_protocol.sync(node, reports=[started], running=[allocation.generation], renew=False,
                            now=at + timedelta(seconds=1))

    assert _started(allocation) == [(node.pk, f"Generation {allocation.generation} started on start-0")]
    assert Allocation.objects.get(pk=allocation.pk).started_at == at


def test_a_gangs_last_start_that_fails_halfway_still_starts_it_when_sent_again(fleet, refuse_start_once) -> None:
    first, _ = register_node("start-1")
    last, _ = register_node("start-2")
    job = make_job(fleet, gpus=4)
    allocation = bind(job, {first: [0, 1], last: [0, 1]})
    at = timezone.now()
    agent_protocol.sync(first, reports=[Report(kind="started", generation=allocation.generation, at=at)],
                        running=[allocation.generation], renew=False, now=at)
    assert Allocation.objects.get(pk=allocation.pk).started_at is None  # one of two nodes
    later = at + timedelta(seconds=3)
    started = Report(kind="started", generation=allocation.generation, at=later)
    refuse_start_once()

    with pytest.raises(DatabaseError):
        agent_protocol.sync(last, reports=[started], running=[allocation.generation], renew=False, now=later)

    assert [n for n, _ in _started(allocation)] == [first.pk]
    refuse_start_once.allow()  # type: ignore[attr-defined]
    agent_protocol.sync(last, reports=[started], running=[allocation.generation], renew=False,
                        now=later + timedelta(seconds=1))

    assert [n for n, _ in _started(allocation)] == [first.pk, last.pk]
    assert Allocation.objects.get(pk=allocation.pk).started_at == later
