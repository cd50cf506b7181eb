"""A maintenance window beginning and ending is in each of its nodes' history, once.

Found by an operator audit of the demo: a window's creation, change and cancellation wrote
events, but nothing recorded that it began (its nodes stopped taking work) or ended (they took
work again): a node's history read "maintenance window 3 from 02:00 UTC for 4 h" and nothing
after, and whether the node was out of service at some hour had to be worked out from the
window's times. The reconcile tick now writes `node.state` `MaintenanceBegan` and
`MaintenanceEnded` on each of the window's nodes, once each, however many ticks and workers
see the boundary.
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from controlplane.choices import EventKind, NodeState
from controlplane.models import Event, MaintenanceWindow, Node
from controlplane.services import maintenance, reconcile
from tests.controlplane.fleet_fixture import Fleet

BOUNDARIES = ("MaintenanceBegan", "MaintenanceEnded")


def _boundaries() -> list[tuple[str, str, str]]:
    return sorted(Event.objects.filter(kind=EventKind.NODE_STATE, reason__in=BOUNDARIES)
                  .values_list("reason", "node__name", "message"))


@pytest.mark.django_db
def test_a_window_beginning_and_ending_is_written_once_on_each_node(fleet: Fleet) -> None:
    now = timezone.now()
    window = maintenance.create(fleet.users["admin"], nodes=["h100-0", "h100-1"], start_at=now + timedelta(minutes=1),
                                duration_s=3600, reason="firmware")

    reconcile.reconcile_nodes(now)
    assert _boundaries() == []  # not begun yet

    began_at = now + timedelta(minutes=2)
    reconcile.reconcile_nodes(began_at)
    reconcile.reconcile_nodes(began_at + timedelta(seconds=3))

    began = Event.objects.filter(kind=EventKind.NODE_STATE, reason="MaintenanceBegan").order_by("node__name")
    assert [e.node.name for e in began] == ["h100-0", "h100-1"]
    first = began[0]
    assert first.created_at == window.start_at
    assert first.message == (f"h100-0: maintenance window {window.pk} began: no new work goes there until "
                             f"{maintenance.when(window.end_at)}: firmware")
    assert first.data["window"] == window.pk and first.data["maintenance"] == "began"

    ended_at = now + timedelta(hours=2)
    # h100-1's agent heartbeats on through the window (this test's clock jumps two hours);
    # h100-0's fell silent: it is suspect when the window ends.
    Node.objects.filter(name="h100-1").update(state=NodeState.READY, last_heartbeat_at=ended_at,
                                              agent_lease_expires_at=ended_at + timedelta(minutes=1))
    reconcile.reconcile_nodes(ended_at)
    reconcile.reconcile_nodes(ended_at + timedelta(seconds=3))

    ended = Event.objects.filter(kind=EventKind.NODE_STATE, reason="MaintenanceEnded").order_by("node__name")
    assert [e.node.name for e in ended] == ["h100-0", "h100-1"]
    assert ended[1].created_at == window.end_at
    assert ended[1].message == f"h100-1: maintenance window {window.pk} ended: it takes work again (firmware)"
    assert ended[0].message.endswith("ended: it is suspect, so it takes no work yet (firmware)")
    assert ended[0].data["node_state"] == "suspect"
    assert len(_boundaries()) == 4


@pytest.mark.django_db
def test_a_window_begun_and_ended_between_two_ticks_writes_both(fleet: Fleet) -> None:
    now = timezone.now()
    window = MaintenanceWindow.objects.create(start_at=now - timedelta(minutes=30), end_at=now - timedelta(minutes=10),
                                              reason="short", created_at=now - timedelta(hours=1))
    window.nodes.set(Node.objects.filter(name="h100-2"))

    reconcile.reconcile_nodes(now)

    assert [(r, n) for r, n, _ in _boundaries()] == [("MaintenanceBegan", "h100-2"), ("MaintenanceEnded", "h100-2")]


@pytest.mark.django_db
def test_a_cancelled_window_that_never_began_writes_no_boundary(fleet: Fleet) -> None:
    now = timezone.now()
    window = maintenance.create(fleet.users["admin"], nodes=["h100-0"], start_at=now + timedelta(minutes=1),
                                duration_s=600, reason="called off")
    maintenance.cancel(window.pk, fleet.users["admin"])

    reconcile.reconcile_nodes(now + timedelta(hours=1))

    assert _boundaries() == []


@pytest.mark.django_db(transaction=True)
def test_two_workers_at_the_boundary_write_it_once(fleet: Fleet) -> None:
    now = timezone.now()
    maintenance.create(fleet.users["admin"], nodes=["h100-0", "h100-1"], start_at=now + timedelta(seconds=30),
                       duration_s=600, reason="race")
    at = now + timedelta(minutes=1)
    go = threading.Barrier(2)

    def worker() -> None:
        try:
            go.wait(5)
            maintenance.record_boundaries(at)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)

    assert [(r, n) for r, n, _ in _boundaries()] == [("MaintenanceBegan", "h100-0"), ("MaintenanceBegan", "h100-1")]


@pytest.mark.django_db
def test_a_window_begun_at_its_writing_is_dated_after_its_creation(fleet: Fleet) -> None:
    # `create` takes a start up to 5 min ago as "now": the node's history must not read the
    # window beginning before it was written.
    now = timezone.now()
    window = maintenance.create(fleet.users["admin"], nodes=["h100-0"], start_at=now - timedelta(minutes=2),
                                duration_s=600, reason="now")

    reconcile.reconcile_nodes(timezone.now())

    began = Event.objects.get(kind=EventKind.NODE_STATE, reason="MaintenanceBegan")
    created = Event.objects.get(reason="MaintenanceWindowCreated")
    assert began.created_at == window.created_at == created.created_at
    assert list(Event.objects.filter(node__name="h100-0", reason__startswith="Maintenance")
                .order_by("created_at", "id").values_list("reason", flat=True)) == ["MaintenanceScheduled",
                                                                                    "MaintenanceBegan"]
