"""`qm sinfo` (Slurm's sinfo for a GPU fleet): per pool its nodes and GPUs, the largest free block
and the GPUs stranded by fragmentation, as metrics/fragmentation/ says them; then the queue's
depth and why jobs wait, as metrics/queue/ does."""

from __future__ import annotations

import re

import pytest

from controlplane.models import Node
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.slow


def test_sinfo_prints_each_pool_and_the_queue_as_the_api_says_them(alice_qm, fleet) -> None:
    f.make_job(fleet.ml, fleet.research, name="big", gpus=8, pending_code="QuotaExceeded")
    f.make_job(fleet.ml, fleet.research, name="two", gpus=2, pending_code="InsufficientGpus")
    f.make_job(fleet.ml, fleet.research, name="three", gpus=3, pending_code="InsufficientGpus")
    api = client_for(fleet, "owner")
    pools = api.get("/api/v1/metrics/fragmentation/").json()["pools"]

    run = alice_qm("sinfo")

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert re.match(r"POOL\s+GPU TYPE\s+NODES\s+WHOLE FREE\s+PART USED\s+GPUS\s+HELD\s+FREE\s+AWAY\s+LARGEST FREE\s+"
                    r"STRANDED$", lines[0])
    assert len(pools) == Node.objects.values("pool").distinct().count() >= 2
    for pool, line in zip(pools, lines[1:], strict=False):
        cells = line.split()
        assert cells[:2] == [pool["pool"], pool["gpu_type"]]
        assert [int(c) for c in cells[2:]] == [pool[k] for k in (
            "nodes", "whole_free_nodes", "partially_used_nodes", "total_gpus", "allocated_gpus", "free_gpus",
            "unavailable_gpus", "largest_free_block", "stranded_gpus")]
    assert lines[1 + len(pools)] == ("Queue: 3 jobs waiting for 13 GPUs (2 InsufficientGpus, 1 QuotaExceeded); "
                                     "0 jobs running on 0 GPUs.")


def test_sinfo_json_is_the_two_api_answers(alice_qm, fleet) -> None:
    body = alice_qm("sinfo", "--json").json()
    assert set(body) == {"fragmentation", "queue"}
    assert body["queue"]["pending_jobs"] == 0 and {p["pool"] for p in body["fragmentation"]["pools"]}


def test_config_prints_the_policy_in_force_and_the_leader(alice_qm, fleet) -> None:
    from controlplane.services import cycle

    before = alice_qm("config").out
    assert re.search(r"^queue_order:\s+priority_fair_share$", before, re.M), before
    assert re.search(r"^placement_by_workload:\s+training=pack, batch=pack, interactive=pack, serving=spread$",
                     before, re.M), before
    assert re.search(r"^backfill:\s+true$", before, re.M) and re.search(r"^locality_weights:\s+0,1,10,30$", before, re.M)
    assert before.rstrip().endswith("No scheduling cycle has run yet.")
    cycle.run_cycle("worker-3")
    after = alice_qm("config").out
    assert re.search(r"^leader:\s+worker-3 \(epoch \d+\)$", after, re.M), after


def test_sinfo_says_when_the_scheduling_loop_has_stalled(alice_qm, fleet) -> None:
    """Found on the operator's walk (7 Dec): with no cycle committed for minutes, `qm sinfo` printed
    "Queue: 3 jobs waiting … (2 InsufficientGpus, 1 QuotaExceeded)" as on a healthy fleet, though
    those reasons were the dead loop's last word and nothing would start; only the overview (in
    red), /healthz and /metrics said the loop was down. metrics/queue/ now says the loop's state
    as /healthz does, and sinfo says it under the queue."""
    from datetime import timedelta

    from django.utils import timezone

    from controlplane.models import SchedulerLease
    from controlplane.services import cycle

    f.make_job(fleet.ml, fleet.research, name="big", gpus=8, pending_code="QuotaExceeded")
    never = alice_qm("sinfo")
    assert never.code == 0, never.err
    assert "No scheduling cycle has run yet: no job starts until the scheduling loop runs" in never.out, never.out

    cycle.run_cycle("worker-3")
    fresh = alice_qm("sinfo")
    assert "scheduling loop" not in fresh.out.lower(), fresh.out

    last = (timezone.now() - timedelta(minutes=10)).replace(microsecond=0)
    SchedulerLease.objects.filter(name="scheduler").update(last_cycle_at=last)
    queue = client_for(fleet, "owner").get("/api/v1/metrics/queue/").json()
    assert queue["loop"]["stalled"] is True and queue["loop"]["last_cycle_age_s"] >= 600
    stalled = alice_qm("sinfo")
    assert stalled.code == 0, stalled.err
    lines = stalled.out.splitlines()
    queue_line = next(i for i, line in enumerate(lines) if line.startswith("Queue: "))
    assert re.fullmatch(
        rf"The scheduling loop has stalled: no cycle has committed for 10 min \(the last at "
        rf"{last:%Y-%m-%d %H:%M:%S} UTC\); the reasons above are as of then, and no job starts until it runs "
        r"again \(/healthz, qm config\)\.", lines[queue_line + 1]), lines[queue_line + 1]
