"""Pages that read the GPUs held now with their jobs (the nodes' heat map on the overview and
the nodes page, the teams page's holdings, the queue figures, the Prometheus quota usage) reach
them through their live allocations (AllocationGpu.held), not by joining every allocation ever
made: with 104,000 allocations PostgreSQL hashed them all for the heat map's 8,334 GPU rows
(54.8 → 24.3 ms for that read alone, bench/scale_audit.py --side-by-side). A join of the held
GPU rows to their allocation must say the allocation is live."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db

PAGES = ("/", "/ui/overview.json", "/nodes/", "/ui/nodes.json", "/teams/", "/metrics")
JOINED = 'INNER JOIN "controlplane_allocation" ON ("controlplane_allocationgpu"."allocation_id"'
HELD = '"controlplane_allocationgpu"."live"'
LIVE = '"controlplane_allocation"."state" '


def test_pages_reach_the_gpus_held_now_through_live_allocations(client_for, submit_as) -> None:
    for i in range(6):
        submit_as("alice" if i % 2 else "bob", name=f"j{i}", gpus=1 + i % 8)
    run_cycle("test", now=timezone.now() - timedelta(minutes=2))
    client = client_for("admin")
    unhinted = {}
    for url in PAGES:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200, url
        joins = [q["sql"] for q in queries.captured_queries if HELD in q["sql"] and JOINED in q["sql"]]
        unhinted[url] = [sql[:200] for sql in joins if LIVE not in sql]
        assert joins or url == "/metrics", url  # each of them reads some
    assert unhinted == dict.fromkeys(PAGES, []), unhinted
