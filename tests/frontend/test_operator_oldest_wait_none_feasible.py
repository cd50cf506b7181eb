"""The overview's "Oldest feasible job waits" tile says "nobody waits" only when nobody waits.

Operator review, 7 Dec: with jobs waiting that the engine leaves out of the oldest feasible wait
(held, waiting for another job, or never able to run as asked), the tile read "nobody waits"
beside "Jobs waiting 3". It now says that none of them is feasible."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from controlplane.services.cycle import run_cycle


def test_operator_waiting_jobs_none_feasible_are_not_nobody(client_for: Any, submit_as: Any) -> None:
    submit_as("alice", name="held", gpus=1, hold=True)
    # 32 A100s: vision may hold 16 at most (8 nominal, 8 borrowed), so it can never run
    submit_as("alice", name="over-quota", gpus=32, gpus_per_node=8, gpu_types=("A100-40GB",))
    run_cycle("test", now=timezone.now() - timedelta(seconds=1))

    admin = client_for("admin")
    text = admin.get("/ui/overview.json").json()["text"]

    assert text["pending_jobs"] == "2"
    assert admin.get("/api/v1/metrics/queue/").json()["pending_by_reason"] == {"CanNeverRun": 1, "Held": 1}
    assert text["oldest_feasible_pending_s"] == "none feasible"   # it said "nobody waits"
    assert 'data-live="oldest_feasible_pending_s">none feasible<' in admin.get("/").content.decode()


def test_operator_an_empty_queue_still_reads_nobody_waits(client_for: Any, submit_as: Any) -> None:
    run_cycle("test", now=timezone.now() - timedelta(seconds=1))
    text = client_for("admin").get("/ui/overview.json").json()["text"]
    assert (text["pending_jobs"], text["oldest_feasible_pending_s"]) == ("0", "nobody waits")
