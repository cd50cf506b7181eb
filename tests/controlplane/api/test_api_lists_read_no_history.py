"""The node and quota lists count what is held now from the GPU rows held now, not from every run
the fleet ever had. On a big installation (1,250 nodes, 107,000 jobs, 776,000 released GPU
rows: bench/scale_audit.py) the node list took 1.3 s, grouping every GPU row each node ever had
for its `allocated_gpus` and again for its COUNT, and the quota list 2.5 s, reading for each
quota every job its team ever ran and their allocations. Here a few dozen ended runs show the
same: the rows each list reads (tests/controlplane/rows_read.py) must not grow with them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import client_for
from tests.controlplane.rows_read import ended_runs, reads_of

pytestmark = pytest.mark.django_db
J = "/api/v1"
TABLES = ("controlplane_allocationgpu", "controlplane_allocation", "controlplane_job")


def _held_now(fleet) -> None:
    now = timezone.now()
    hold(running_job(fleet.ml, gpus=8, started_at=now), [(fleet.nodes[1], 8)], now)
    hold(running_job(fleet.vision, gpus=4, started_at=now), [(fleet.nodes[2], 4)], now)


def _reads_with_history(fleet, url: str) -> tuple[dict[str, int], dict, int]:
    """The rows `url` reads beside 360 ended runs (2,880 released GPU rows), its answer and its
    query count. With 120, one whole-suite run in about twenty (CI, 7 Dec) saw PostgreSQL read
    every GPU row of each node through the node's plain index: with so little history the two
    plans cost 11 against 18, close enough for one worker's table and index sizes to tip it."""
    admin = client_for(fleet, "admin")
    ended_runs(fleet, 360)
    admin.get(url)
    read = reads_of(lambda: admin.get(url), *TABLES)
    with CaptureQueriesContext(connection) as queries:
        answer = admin.get(url).json()
    return read, answer, len(queries)


def _plan(fleet) -> str:
    """The list's plan, for a failure's message: which index reached the GPU rows."""
    from controlplane.api.views.fleet import NodeViewSet

    return NodeViewSet().get_queryset().explain()


def test_the_node_list_reads_only_the_gpus_held_now(fleet) -> None:
    _held_now(fleet)

    read, answer, queries = _reads_with_history(fleet, f"{J}/nodes/")

    nodes = {n["name"]: n["allocated_gpus"] for n in answer["results"]}
    assert nodes[fleet.nodes[1].name] == 8 and nodes[fleet.nodes[2].name] == 4
    assert sum(nodes.values()) == 12
    # the 12 GPU rows held now, for the page and for its COUNT at most; was 1,944 with 120 runs:
    # every GPU row each node ever had, twice
    if read["controlplane_allocationgpu"] > 24:
        print(_plan(fleet))  # shown whole with the failure, where an assertion message is cut
    assert read["controlplane_allocationgpu"] <= 24, read
    assert queries == 3


def test_the_quota_list_counts_the_gpus_held_now_once_not_per_quota(fleet) -> None:
    _held_now(fleet)
    admin = client_for(fleet, "admin")
    ended_runs(fleet, 20)
    admin.get(f"{J}/quotas/")

    with CaptureQueriesContext(connection) as queries:
        answer = admin.get(f"{J}/quotas/").json()

    held = {(q["team"], q["gpu_type"]): q["held_gpus"] for q in answer["results"]}
    assert held[("ml", "H100-80GB")] == 8 and held[("vision", "H100-80GB")] == 4
    assert sum(held.values()) == 12
    # One grouped count of the GPU rows held now (quotas.held_now), its figures then written into
    # the list's query; before, the list's query counted them in a subquery run once per quota,
    # which PostgreSQL answered by reading every job the quota's team ever ran (2.5 s for 60
    # quotas with 107,000 jobs: bench/scale_audit.py).
    lists = [q["sql"] for q in queries.captured_queries if 'FROM "controlplane_quota"' in q["sql"]]
    assert lists and not any("controlplane_allocationgpu" in sql for sql in lists), lists
    # was 6: the grouped count comes first; 8 since 7 Dec: every team's nominal per GPU type, for
    # the quotas' `warnings` against the fleet (read once, its capacity shared with `lent_gpus`)
    assert len(queries) == 8
