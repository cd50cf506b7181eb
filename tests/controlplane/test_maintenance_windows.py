"""Maintenance windows in the service and the snapshot (services/maintenance.py,
services/snapshot.py): checked whole, written with their audit events, handed to the engine
while not ended and not cancelled, and the running jobs an operator must deal with named."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import EventKind, JobState, NodeState
from controlplane.models import Event, MaintenanceWindow, Node
from controlplane.services import maintenance, nodes, reconcile, transitions
from controlplane.services.snapshot import read_snapshot
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import Fleet


def _admin(fleet: Fleet):  # noqa: ANN202
    return fleet.users["admin"]


def _run(fleet: Fleet, node: str, gpus: int, *, limit_s: int, started_ago_s: int = 0, name: str = "busy",  # noqa: ANN202
         first_gpu: int = 0):
    job = f.make_job(fleet.ml, fleet.research, name=name, gpus=gpus, runtime_limit_s=limit_s)
    at = timezone.now() - timedelta(seconds=started_ago_s)
    with transaction.atomic():
        lease = reconcile.lock_scheduler_lease()
        transitions.bind_job(job.pk, [transitions.GpuSet(node_id=Node.objects.get(name=node).pk,
                                                         gpu_indices=list(range(first_gpu, first_gpu + gpus)))],
                             lease=lease, borrowed=False, at=at, actor="test")
    return job


def test_a_window_is_written_with_its_nodes_and_audit_events(fleet: Fleet) -> None:
    start = timezone.now() + timedelta(hours=1)

    window = maintenance.create(_admin(fleet), nodes=["h100-1", "h100-0"], start_at=start, duration_s=4 * 3600,
                                reason="  firmware upgrade ")

    assert sorted(n.name for n in window.nodes.all()) == ["h100-0", "h100-1"]
    assert window.end_at == start + timedelta(hours=4) and window.reason == "firmware upgrade"
    assert window.created_by == _admin(fleet) and window.cancelled_at is None
    audit = Event.objects.get(kind=EventKind.CONFIG_CHANGED, reason="MaintenanceWindowCreated")
    assert audit.node_id is None and audit.actor == "user:root"
    assert audit.data["model"] == "maintenancewindow" and audit.data["before"] is None
    assert audit.data["after"]["nodes"] == ["h100-0", "h100-1"] and audit.data["after"]["id"] == window.pk
    assert audit.message.startswith(f"Maintenance window {window.pk} created: h100-0, h100-1 from ")
    assert audit.message.endswith("(4 h): firmware upgrade")
    per_node = Event.objects.filter(reason="MaintenanceScheduled").order_by("node__name")
    assert [e.node.name for e in per_node] == ["h100-0", "h100-1"]
    assert per_node[0].message.startswith(f"h100-0: maintenance window {window.pk} from ")


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"nodes": []}, "nodes", "give at least one node"),
    ({"nodes": ["h100-1", "nope-7"]}, "nodes", "no node named 'nope-7'"),
    ({"nodes": None, "pool": "b200"}, "pool", "no pool named 'b200' has a node in the fleet: pools are a100, h100"),
    ({"reason": "  "}, "reason", "give what the maintenance is"),
    ({"reason": "x" * 201}, "reason", "201 characters: at most 200"),
    ({"reason": "two\nlines"}, "reason", "one line of text"),
    ({"start_at": None}, "start_at", "give when the maintenance begins"),
    ({"duration_s": None}, "end_at", "give when the maintenance ends"),
    ({"duration_s": 0}, "duration_s", "a window lasts at least a second"),
    ({"duration_s": 15 * 86400}, "duration_s", "15 d long: a window lasts at most 14 d (QM_MAINTENANCE_MAX_S); "
                                                "schedule a longer maintenance as back-to-back windows"),
    ({"duration_s": None, "end_at": "start"}, "end_at", "not after its start"),
    ({"start_at": "past", "duration_s": 60}, "duration_s", "which is past"),
    ({"end_at": "later"}, "end_at", "not both"),
])
def test_bad_input_is_refused_naming_the_field_and_nothing_is_written(fleet: Fleet, fields, field, words) -> None:  # noqa: ANN001
    now = timezone.now()
    start = now + timedelta(hours=1)
    given = {"nodes": ["h100-1"], "start_at": start, "duration_s": 3600, "reason": "firmware"}
    given.update(fields)
    given["start_at"] = now - timedelta(hours=2) if given["start_at"] == "past" else given["start_at"]
    if given.get("end_at") == "start":
        given["end_at"] = start
    elif given.get("end_at") == "later":
        given["end_at"] = start + timedelta(hours=3)

    with pytest.raises(maintenance.Refused) as refused:
        maintenance.create(_admin(fleet), now=now, **given)

    assert field in refused.value.errors, refused.value.errors
    assert words in refused.value.errors[field]
    assert not MaintenanceWindow.objects.exists()
    assert not f.trail().filter(kind=EventKind.CONFIG_CHANGED).exists()


def test_a_retired_node_is_refused_and_a_pool_leaves_its_retired_nodes_out(fleet: Fleet) -> None:
    nodes.retire(Node.objects.get(name="h100-3"), _admin(fleet))
    start = timezone.now() + timedelta(hours=1)

    with pytest.raises(maintenance.Refused) as refused:
        maintenance.create(_admin(fleet), nodes=["h100-3"], start_at=start, duration_s=60, reason="x")
    window = maintenance.create(_admin(fleet), pool="h100", nodes=["a100-0"], start_at=start, duration_s=60,
                                reason="rack move")

    assert "h100-3 is retired" in refused.value.errors["nodes"]
    assert sorted(n.name for n in window.nodes.all()) == ["a100-0", "h100-0", "h100-1", "h100-2"]


def test_the_snapshot_carries_open_windows_and_not_ended_or_cancelled_ones(fleet: Fleet) -> None:
    now = timezone.now()
    root = _admin(fleet)
    upcoming = maintenance.create(root, nodes=["h100-1", "h100-0"], start_at=now + timedelta(hours=1),
                                  duration_s=7200, reason="firmware")
    active = maintenance.create(root, nodes=["a100-0"], start_at=now - timedelta(minutes=1), duration_s=3600,
                                reason="cabling")
    cancelled = maintenance.create(root, nodes=["h100-2"], start_at=now + timedelta(hours=2), duration_s=60,
                                   reason="gone")
    maintenance.cancel(cancelled.pk, root)
    ended = MaintenanceWindow.objects.create(start_at=now - timedelta(hours=3), end_at=now - timedelta(hours=1),
                                             reason="old", created_at=now - timedelta(days=1))
    ended.nodes.set([Node.objects.get(name="h100-3")])

    windows = read_snapshot(now, epoch=1).snapshot.maintenance

    assert [w.id for w in windows] == [str(active.pk), str(upcoming.pk)]
    first, second = windows
    assert first.nodes == ("a100-0",) and first.reason == "cabling"
    assert second.nodes == ("h100-0", "h100-1")
    assert second.start_at == upcoming.start_at.timestamp() and second.end_at == upcoming.end_at.timestamp()
    assert second.end_at - second.start_at == 7200


def test_the_snapshot_reads_windows_in_one_query_whatever_their_number(fleet: Fleet) -> None:
    now = timezone.now()
    root = _admin(fleet)
    maintenance.create(root, nodes=["h100-1"], start_at=now + timedelta(hours=1), duration_s=60, reason="one")
    with CaptureQueriesContext(connection) as one:
        assert len(read_snapshot(now, epoch=1).snapshot.maintenance) == 1
    for i in range(12):
        maintenance.create(root, pool="h100", start_at=now + timedelta(hours=2 + i), duration_s=60, reason=f"w{i}")
    with CaptureQueriesContext(connection) as many:
        windows = read_snapshot(now, epoch=1).snapshot.maintenance
    assert len(windows) == 13 and all(len(w.nodes) == 4 for w in windows[1:])
    assert len(many) == len(one)
    assert sum("controlplane_maintenancewindow" in q["sql"] for q in many.captured_queries) == 1


def test_affected_running_jobs_are_those_still_holding_gpus_when_it_begins(fleet: Fleet) -> None:
    root = _admin(fleet)
    # Ends 30 min from now by its limit: before a window in 1 h.
    _run(fleet, "h100-1", 2, limit_s=3600, started_ago_s=1800, name="ends-before")
    long = _run(fleet, "h100-1", 2, limit_s=6 * 3600, name="still-there", first_gpu=2)
    elsewhere = _run(fleet, "h100-2", 8, limit_s=6 * 3600, name="elsewhere")
    window = maintenance.create(root, nodes=["h100-1", "h100-0"], start_at=timezone.now() + timedelta(hours=1),
                                duration_s=3600, reason="firmware")
    other = maintenance.create(root, nodes=["h100-2"], start_at=timezone.now() + timedelta(days=1),
                               duration_s=3600, reason="later")

    listed = list(MaintenanceWindow.objects.prefetch_related("nodes").order_by("pk"))
    with CaptureQueriesContext(connection) as queries:
        affected = maintenance.affected_running_jobs(listed)

    assert [j.job_id for j in affected[window.pk]] == [long.pk]
    job = affected[window.pk][0]
    assert job.gpus == 2 and job.nodes == ["h100-1"] and job.state == JobState.RUNNING
    assert job.holds_until > window.start_at
    # A window a day ahead: the 6 h job has ended by its limit then.
    assert affected[other.pk] == []
    assert elsewhere.pk not in [j.job_id for j in affected[window.pk]]
    assert len(queries) == 1
    # A member of another team sees the job's team, not its id or name.
    seen = job.as_seen_by(maintenance.Access(is_admin=False, is_finance=False, team_ids=frozenset({fleet.vision.pk})))
    assert seen["id"] is None and seen["name"] is None and seen["team"] == "ml"


def test_a_change_is_all_or_nothing_and_recorded_on_old_and_new_nodes(fleet: Fleet) -> None:
    root = _admin(fleet)
    start = timezone.now() + timedelta(hours=1)
    window = maintenance.create(root, nodes=["h100-0", "h100-1"], start_at=start, duration_s=3600, reason="fw")

    with pytest.raises(maintenance.Refused) as refused:
        maintenance.change(window.pk, root, {"nodes": ["h100-1", "h100-2"], "duration_s": 20 * 86400})
    assert set(refused.value.errors) == {"duration_s"}
    assert sorted(n.name for n in MaintenanceWindow.objects.get(pk=window.pk).nodes.all()) == ["h100-0", "h100-1"]

    moved = maintenance.change(window.pk, root, {"nodes": ["h100-1", "h100-2"], "start_at": start + timedelta(hours=2)})

    # Moving the start alone keeps the length.
    assert moved.start_at == start + timedelta(hours=2) and moved.end_at == start + timedelta(hours=3)
    audit = Event.objects.get(reason="MaintenanceWindowChanged")
    assert "nodes added: h100-2" in audit.message and "nodes removed: h100-0" in audit.message
    assert audit.data["before"]["nodes"] == ["h100-0", "h100-1"] and audit.data["after"]["nodes"] == ["h100-1", "h100-2"]
    on = {e.node.name: e.reason for e in Event.objects.filter(data__window=window.pk, created_at__gte=audit.created_at)}
    assert on == {"h100-0": "MaintenanceRemoved", "h100-1": "MaintenanceRescheduled", "h100-2": "MaintenanceScheduled"}
    # A change that changes nothing records nothing.
    maintenance.change(window.pk, root, {"reason": "fw"})
    assert Event.objects.filter(reason="MaintenanceWindowChanged").count() == 1


def test_a_begun_window_keeps_its_start_and_history_is_not_changed(fleet: Fleet) -> None:
    root = _admin(fleet)
    now = timezone.now()
    active = maintenance.create(root, nodes=["h100-0"], start_at=now - timedelta(minutes=1), duration_s=3600,
                                reason="fw")

    with pytest.raises(maintenance.Refused) as refused:
        maintenance.change(active.pk, root, {"start_at": now + timedelta(hours=1)})
    longer = maintenance.change(active.pk, root, {"end_at": now + timedelta(hours=3)})
    cancelled = maintenance.cancel(active.pk, root)
    again = maintenance.cancel(active.pk, root)

    assert "its start cannot move" in refused.value.errors["start_at"]
    assert longer.end_at == now + timedelta(hours=3)
    assert cancelled.cancelled_at is not None and again.cancelled_at == cancelled.cancelled_at
    assert Event.objects.filter(reason="MaintenanceWindowCancelled").count() == 1
    assert Event.objects.filter(reason="MaintenanceCancelled", node__name="h100-0").count() == 1
    with pytest.raises(maintenance.Conflicted, match="was cancelled at"):
        maintenance.change(active.pk, root, {"reason": "other"})
    MaintenanceWindow.objects.filter(pk=active.pk).update(cancelled_at=None, end_at=now - timedelta(seconds=1),
                                                          start_at=now - timedelta(hours=1))
    with pytest.raises(maintenance.Conflicted, match="ended at"):
        maintenance.cancel(active.pk, root)


def test_a_window_of_a_node_later_retired_leaves_the_snapshot(fleet: Fleet) -> None:
    root = _admin(fleet)
    now = timezone.now()
    maintenance.create(root, nodes=["h100-3"], start_at=now + timedelta(hours=1), duration_s=60, reason="fw")
    Node.objects.filter(name="h100-3").update(state=NodeState.RETIRED, retired_at=now)

    assert read_snapshot(now, epoch=1).snapshot.maintenance == ()
