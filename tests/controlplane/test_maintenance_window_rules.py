"""The rules of a maintenance window's time and nodes (services/maintenance.py): it starts now or
later (a few minutes of clock skew taken); an upcoming window's start does not move into the
past, a begun one's end moves but not to the past; no node is in two windows at once, back to
back is fine; and two admins scheduling overlapping windows at the same moment on two
connections: one is written, the other refused (row locks on the nodes)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import EventKind
from controlplane.models import Event, MaintenanceWindow
from controlplane.services import maintenance
from tests.controlplane.fleet_fixture import Fleet, build_fleet
from tests.controlplane.lock_waits import blocked_on_a_lock, in_thread


def _admin(fleet: Fleet):  # noqa: ANN202
    return fleet.users["admin"]


def _nothing_written(windows: int = 0, events: int = 0) -> None:
    assert MaintenanceWindow.objects.count() == windows
    assert Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason__startswith="Maintenance").count() == events


def test_a_window_cannot_start_in_the_past(fleet: Fleet) -> None:
    now = timezone.now()
    with pytest.raises(maintenance.Refused) as refused:
        maintenance.create(_admin(fleet), nodes=["h100-1"], start_at=now - timedelta(minutes=20), duration_s=3600,
                           reason="firmware", now=now)

    words = refused.value.errors["start_at"]
    assert set(refused.value.errors) == {"start_at"}
    assert words.startswith(f"it starts at {maintenance.when(now - timedelta(minutes=20))}, before now "
                            f"({maintenance.when(now)}): a window starts now or later")
    assert "up to 5 min earlier is taken" in words and words.endswith("to take nodes out at once, start it now")
    _nothing_written()

    # A few minutes of clock skew (or a form filled in a minute) is taken: the window begins at once.
    skewed = maintenance.create(_admin(fleet), nodes=["h100-1"], start_at=now - timedelta(minutes=4),
                                duration_s=3600, reason="firmware", now=now)
    assert skewed.state_at(now) == "active"
    _nothing_written(windows=1, events=2)  # created: the audit event and one on its node


def test_an_upcoming_windows_start_cannot_move_into_the_past(fleet: Fleet) -> None:
    now = timezone.now()
    window = maintenance.create(_admin(fleet), nodes=["h100-1"], start_at=now + timedelta(hours=1),
                                duration_s=3600, reason="fw", now=now)

    with pytest.raises(maintenance.Refused) as refused:
        maintenance.change(window.pk, _admin(fleet), {"start_at": now - timedelta(hours=1),
                                                      "end_at": now + timedelta(hours=2)}, now=now)
    assert "before now" in refused.value.errors["start_at"]
    assert MaintenanceWindow.objects.get(pk=window.pk).start_at == now + timedelta(hours=1)
    assert not Event.objects.filter(reason="MaintenanceWindowChanged").exists()

    # Moved to now: the nodes go out at once.
    started = maintenance.change(window.pk, _admin(fleet), {"start_at": now}, now=now)
    assert started.start_at == now and started.end_at == now + timedelta(hours=1)


def test_a_begun_window_can_be_extended_or_shortened_but_not_to_the_past(fleet: Fleet) -> None:
    now = timezone.now()
    window = maintenance.create(_admin(fleet), nodes=["h100-1"], start_at=now, duration_s=3600, reason="fw", now=now)
    later = now + timedelta(minutes=10)

    longer = maintenance.change(window.pk, _admin(fleet), {"end_at": now + timedelta(hours=3)}, now=later)
    shorter = maintenance.change(window.pk, _admin(fleet), {"end_at": now + timedelta(minutes=30)}, now=later)
    with pytest.raises(maintenance.Refused) as too_short:
        maintenance.change(window.pk, _admin(fleet), {"end_at": now + timedelta(minutes=5)}, now=later)
    with pytest.raises(maintenance.Refused) as moved:
        maintenance.change(window.pk, _admin(fleet), {"start_at": later}, now=later)

    assert longer.end_at == now + timedelta(hours=3) and shorter.end_at == now + timedelta(minutes=30)
    assert "which is past" in too_short.value.errors["end_at"]
    assert "its start cannot move" in moved.value.errors["start_at"]
    assert MaintenanceWindow.objects.get(pk=window.pk).end_at == now + timedelta(minutes=30)
    assert Event.objects.filter(reason="MaintenanceWindowChanged").count() == 2


def test_windows_on_the_same_node_cannot_overlap(fleet: Fleet) -> None:
    root = _admin(fleet)
    now = timezone.now()
    start = now + timedelta(hours=2)
    first = maintenance.create(root, nodes=["h100-1", "h100-2"], start_at=start, duration_s=4 * 3600,
                               reason="firmware upgrade", now=now)

    with pytest.raises(maintenance.Refused) as refused:
        maintenance.create(root, nodes=["h100-2", "h100-3", "h100-1"], start_at=start + timedelta(hours=3),
                           duration_s=3600, reason="cabling", now=now)

    words = refused.value.errors["nodes"]
    assert set(refused.value.errors) == {"nodes"}
    assert words.startswith(f"h100-1, h100-2 are already in maintenance window {first.pk} (firmware upgrade, "
                            f"from {maintenance.when(start)} to {maintenance.when(start + timedelta(hours=4))}, 4 h)")
    assert f"windows on the same node cannot overlap; extend or change window {first.pk} instead" in words
    assert "h100-3" not in words
    _nothing_written(windows=1, events=3)

    # A pool that holds one of its nodes overlaps too; a window inside another as well.
    with pytest.raises(maintenance.Refused) as by_pool:
        maintenance.create(root, pool="h100", start_at=start + timedelta(hours=1), duration_s=600, reason="x",
                           now=now)
    assert f"already in maintenance window {first.pk}" in by_pool.value.errors["nodes"]
    _nothing_written(windows=1, events=3)


def test_back_to_back_windows_are_allowed(fleet: Fleet) -> None:
    root = _admin(fleet)
    now = timezone.now()
    start = now + timedelta(hours=2)
    first = maintenance.create(root, nodes=["h100-1"], start_at=start, duration_s=3600, reason="one", now=now)

    after = maintenance.create(root, nodes=["h100-1"], start_at=start + timedelta(hours=1), duration_s=3600,
                               reason="right after", now=now)
    before = maintenance.create(root, nodes=["h100-1"], start_at=start - timedelta(hours=1), end_at=start,
                                reason="right before", now=now)
    # Other nodes at the same time; and over a cancelled window, or one that has ended.
    elsewhere = maintenance.create(root, nodes=["h100-2"], start_at=start, duration_s=3600, reason="other", now=now)
    maintenance.cancel(elsewhere.pk, root)
    again = maintenance.create(root, nodes=["h100-2"], start_at=start, duration_s=3600, reason="again", now=now)
    past = maintenance.create(root, nodes=["h100-3"], start_at=now, duration_s=600, reason="short", now=now)
    behind = maintenance.create(root, nodes=["h100-3"], start_at=now + timedelta(minutes=8), duration_s=600,
                                reason="after it ended", now=now + timedelta(minutes=11))

    assert first.end_at == after.start_at and before.end_at == first.start_at
    assert again.start_at == elsewhere.start_at and past.end_at > behind.start_at
    assert MaintenanceWindow.objects.count() == 7


def test_a_change_that_would_overlap_another_window_is_refused_whole(fleet: Fleet) -> None:
    root = _admin(fleet)
    now = timezone.now()
    start = now + timedelta(hours=2)
    one = maintenance.create(root, nodes=["h100-1"], start_at=start, duration_s=3600, reason="one", now=now)
    two = maintenance.create(root, nodes=["h100-2"], start_at=start, duration_s=3600, reason="two", now=now)

    with pytest.raises(maintenance.Refused) as joined:
        maintenance.change(two.pk, root, {"nodes": ["h100-2", "h100-1"], "reason": "two and more"}, now=now)
    assert set(joined.value.errors) == {"nodes"}
    assert joined.value.errors["nodes"].startswith(f"h100-1 is already in maintenance window {one.pk} (one, ")
    assert not Event.objects.filter(reason="MaintenanceWindowChanged").exists()
    assert [n.name for n in MaintenanceWindow.objects.get(pk=two.pk).nodes.all()] == ["h100-2"]
    assert MaintenanceWindow.objects.get(pk=two.pk).reason == "two"

    # A window does not overlap itself: extended, or moved past the other, it is changed.
    longer = maintenance.change(one.pk, root, {"end_at": start + timedelta(hours=3)}, now=now)
    moved = maintenance.change(two.pk, root, {"nodes": ["h100-2", "h100-1"], "start_at": longer.end_at}, now=now)
    assert moved.start_at == longer.end_at and moved.end_at == longer.end_at + timedelta(hours=1)
    # Moved back into it: refused, the window as it was.
    with pytest.raises(maintenance.Refused) as back:
        maintenance.change(two.pk, root, {"start_at": start}, now=now)
    assert f"h100-1 is already in maintenance window {one.pk}" in back.value.errors["nodes"]
    assert MaintenanceWindow.objects.get(pk=two.pk).start_at == longer.end_at


# ------------------------------------------------------------------ two admins at once


@pytest.fixture
def committed_fleet(transactional_db: Any, settings: Any) -> Fleet:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return build_fleet()


def test_two_concurrent_overlapping_windows_one_is_refused(committed_fleet: Fleet,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = committed_fleet.users["admin"]
    start = timezone.now() + timedelta(hours=2)
    # The first create stops inside its transaction, its window written and not committed yet.
    written, go_on = threading.Event(), threading.Event()
    record = maintenance._record

    def held_record(window: MaintenanceWindow, verb: str, *args: Any) -> list[Event]:
        if window.reason == "first":
            written.set()
            assert go_on.wait(20)
        return record(window, verb, *args)

    monkeypatch.setattr(maintenance, "_record", held_record)
    first, first_out = in_thread(lambda: maintenance.create(
        root, nodes=["h100-1", "h100-2"], start_at=start, duration_s=4 * 3600, reason="first"))
    assert written.wait(20), first_out
    # The second passes the check made before its transaction (the first is not committed), then
    # waits for the row lock on h100-2 that the first holds.
    second, second_out = in_thread(lambda: maintenance.create(
        root, nodes=["h100-3", "h100-2"], start_at=start + timedelta(hours=1), duration_s=3600, reason="second"))
    blocked = blocked_on_a_lock()
    go_on.set()
    first.join(20)
    second.join(20)

    assert blocked, "the second create did not wait for the nodes' row locks"
    assert "error" not in first_out, first_out
    window = first_out["result"]
    refused = second_out.get("error")
    assert isinstance(refused, maintenance.Refused), second_out
    assert refused.errors["nodes"].startswith(f"h100-2 is already in maintenance window {window.pk} (first, ")
    assert list(MaintenanceWindow.objects.values_list("reason", flat=True)) == ["first"]
    assert Event.objects.filter(reason="MaintenanceWindowCreated").count() == 1
