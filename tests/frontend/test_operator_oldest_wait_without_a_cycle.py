"""The overview's "Oldest feasible job waits" tile with no cycle in its window: never "nobody
waits" beside jobs waiting.

Operator walk, 8 Dec: the tile is the last scheduling cycle's finding, read from the cycle samples
of the page's window. With none there, it read "nobody waits" whatever waited: on a fleet whose
loop had not run yet beside "Jobs waiting 1", and under *last hour* with the loop stopped for two
hours (the red banner saying so) beside "Jobs waiting 31", where the last cycle had found a job
waiting 10 minutes. The last cycle before the window now gives the tile its finding, as it gives
the line under the tiles its time, and a fleet with no cycle yet reads "no cycle yet"."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from controlplane.models import FleetSample
from tests.frontend.page_data import sample


def _tile(client: Any, window: str = "24h") -> tuple[str, str]:
    text = client.get(f"/ui/overview.json?window={window}").json()["text"]
    return text["pending_jobs"], text["oldest_feasible_pending_s"]


def test_operator_jobs_waiting_before_any_cycle_read_no_cycle_yet(client_for: Any, submit_as: Any) -> None:
    FleetSample.objects.all().delete()
    submit_as("alice", name="first", gpus=1)
    admin = client_for("admin")
    assert _tile(admin) == ("1", "no cycle yet")   # it said "nobody waits"
    assert 'data-live="oldest_feasible_pending_s">no cycle yet<' in admin.get("/").content.decode()


def test_operator_a_loop_silent_past_the_window_gives_its_last_finding(client_for: Any, submit_as: Any) -> None:
    FleetSample.objects.all().delete()
    submit_as("alice", name="waits", gpus=1)
    sample(timezone.now() - timedelta(hours=2), pending_jobs=1, oldest_feasible_pending_s=600.0)
    admin = client_for("admin")
    assert _tile(admin, "1h") == ("1", "10 min")    # it said "nobody waits"
    # ... and none feasible at that cycle is said as such
    FleetSample.objects.update(oldest_feasible_pending_s=None)
    assert _tile(admin, "1h") == ("1", "none feasible")


def test_operator_an_empty_queue_with_no_cycle_still_reads_nobody_waits(client_for: Any) -> None:
    FleetSample.objects.all().delete()
    assert _tile(client_for("admin")) == ("0", "nobody waits")
