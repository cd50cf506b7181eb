"""An agent's contact that fails halfway leaves no state change without its event (PostgreSQL;
the event's insert refused by a trigger, as tests/controlplane/api/test_api_cancel_races.py
does). "Every state change of a job or allocation is an Event someone can read later": until
5 Dec a suspect node's return to ready (its heartbeats resumed) was written apart from its
event, each statement committed on its own, so a failure between them (the database going away,
a statement refused) left the node ready with no event saying so. Now it is written with its
event or not at all, and the next heartbeat does it again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Event, Node
from controlplane.services import agent_protocol
from tests.controlplane.loop_fixtures import LoopFleet, register_node

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def refuse_event() -> Iterator[callable]:  # type: ignore[valid-type]
    made: list[str] = []

    def refuse(kind: str, reason: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "CREATE FUNCTION qa_refuse_event() RETURNS trigger AS $$ BEGIN "
                f"IF NEW.kind = '{kind}' AND NEW.reason = '{reason}' THEN RAISE EXCEPTION 'refused by the test'; "
                "END IF; RETURN NEW; END $$ LANGUAGE plpgsql")
            cursor.execute("CREATE TRIGGER qa_refuse_event BEFORE INSERT ON controlplane_event "
                           "FOR EACH ROW EXECUTE FUNCTION qa_refuse_event()")
        made.append("qa_refuse_event")

    yield refuse
    with connection.cursor() as cursor:
        for _ in made:
            cursor.execute("DROP TRIGGER qa_refuse_event ON controlplane_event")
            cursor.execute("DROP FUNCTION qa_refuse_event()")


def test_a_suspect_nodes_return_is_written_with_its_event_or_not_at_all(fleet: LoopFleet, refuse_event) -> None:  # type: ignore[no-untyped-def]
    node, _ = register_node("half-written-0")
    Node.objects.filter(pk=node.pk).update(state=NodeState.SUSPECT,
                                           agent_lease_expires_at=timezone.now() + timedelta(seconds=10))
    node.refresh_from_db()
    refuse_event("node.state", "HeartbeatsResumed")

    with pytest.raises(DatabaseError):
        agent_protocol.sync(node, reports=(), running=(), renew=True, now=timezone.now())

    assert Node.objects.get(pk=node.pk).state == NodeState.SUSPECT
    assert not Event.objects.filter(node=node, reason="HeartbeatsResumed").exists()
