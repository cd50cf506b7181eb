"""`qm nodes` and `GET nodes/` say which nodes a maintenance window holds now: such a node reads
`ready` (no cordon is written) but takes no work until the window ends. Before, `qm nodes` and
the API said "ready" and nothing else, and only the Nodes page marked it."""

from __future__ import annotations

from datetime import UTC, timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from controlplane.services import maintenance


def test_qm_nodes_and_the_api_name_the_window_holding_a_node_now(qm, fleet) -> None:
    root = get_user_model().objects.get(username="root")
    now = timezone.now()
    window = maintenance.create(root, nodes=["h100-2"], start_at=now, duration_s=3600, reason="PSU swap")
    maintenance.create(root, nodes=["h100-3"], start_at=now + timedelta(hours=2), duration_s=3600, reason="later")
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    listed = qm("nodes").out
    api = qm("--json", "nodes").json()["results"]

    ends = window.end_at.astimezone(UTC)
    row = next(line for line in listed.splitlines() if line.startswith("h100-2 "))
    said = f"{ends:%H:%M} UTC" if ends.date() == timezone.now().astimezone(UTC).date() else f"{ends:%Y-%m-%d %H:%M} UTC"
    assert f"ready (maintenance {window.pk} until {said})" in row
    later = next(line for line in listed.splitlines() if line.startswith("h100-3 "))
    assert "maintenance" not in later and " ready " in f"{later} "
    by_name = {n["name"]: n for n in api}
    assert by_name["h100-2"]["maintenance_window"] == window.pk
    assert by_name["h100-2"]["maintenance_ends_at"].startswith(f"{ends:%Y-%m-%dT%H:%M}")
    assert by_name["h100-3"]["maintenance_window"] is None and by_name["h100-3"]["maintenance_ends_at"] is None

    maintenance.cancel(window.pk, root)
    assert "maintenance" not in next(line for line in qm("nodes").out.splitlines() if line.startswith("h100-2 "))


def test_a_window_ending_another_day_is_said_with_its_date(qm, fleet) -> None:
    """`qm nodes` read "until 06:28 UTC" for a window ending tomorrow, as if today."""
    root = get_user_model().objects.get(username="root")
    window = maintenance.create(root, nodes=["h100-2"], start_at=timezone.now(), duration_s=2 * 86400, reason="rack")
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    row = next(line for line in qm("nodes").out.splitlines() if line.startswith("h100-2 "))

    assert f"ready (maintenance {window.pk} until {window.end_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC)" in row
