"""Pages read in a fixed number of queries, whatever the number of jobs, nodes or samples: no
N+1 can creep in (the counts are pinned, and checked not to grow with the data)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import AllocationGpu, Job, Node
from controlplane.services import accounting
from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db

# Queries per page, session and user lookups included.
PINNED = {
    # five of them for the tiles' live counts (services/fleet_figures.py: the queue, three; the
    # waiting jobs that need whole nodes, for the stranded GPUs, two; the nodes are the heat map's)
    # one more for where the accounting's record begins inside the utilization chart's first hour
    # (utilization_series.record_began_within: the chart starts there, not before the fleet was)
    "/": 19,
    "/ui/overview.json": 19,
    # one for the listed jobs' held GPUs (gpus_held); the page's ids are read apart from their rows
    # (services/job_pages.py: sorted on the jobs table alone, not after joining every job); one for
    # the newest job id, which its live update asks about the jobs after (job_pages.newest_id)
    "/jobs/": 13,
    "/ui/jobs.json": 4,
    # one for its dependencies, both ways (services/dependencies.page_of); its Output panel two
    # (its runs; each rank's span), three once it has output (the last lines); its Runs panel seven
    # (the latest runs with their count, their GPUs, their events; what all its runs cost: their
    # spans, gang members' early exits, the changes of their borrowed flag, the price rates; none
    # for a job that never ran)
    "/jobs/{job}/": 20,
    "/ui/jobs/{job}.json": 20,
    # four for the dominant shares and fair-share usage read live, as `qm sshare` reads them
    # (fair_share.fair_shares; before 6 Dec the page showed the last cycle's sample); one fewer
    # since 7 Dec: the lent shares follow the engine's rule, which needs no read of the fleet's GPUs
    "/teams/": 17,
    # six and a half days from 13:30: its first day is partial, so it reads the hour and minute rows
    # too at any hour (the default 7d back from 00:00:xx is whole days only: one query fewer); one
    # for each GPU type and tier's first price rate (GPU time before it is named as unpriced); one
    # for when the accounting began, on a fleet younger than a day before the window (its banner)
    "/showback/?window={window}": 12,
    # one for the maintenance windows active or upcoming (two more, their nodes and running jobs,
    # once there is one: tests/frontend/test_operator_maintenance_pages.py); every node's counts
    # (two: GPUs held per node, the nodes), the page's grid (two), its heartbeats with the retired
    # nodes (one); the page one more for its filter's GPU types (tests/frontend/test_nodes_page_pages.py);
    # the waiting jobs that need whole nodes, for each pool's stranded GPUs (two, fleet_figures.fragmentation_of)
    "/nodes/": 12,
    "/ui/nodes.json": 11,
    # the node, its slots (two), the jobs on it, its events; its tiers over the window
    # (services/node_tiers.py): the rollup cursor, when it joined, when the accounting began, its
    # GPUs' holders, gang members gone early, its samples; its jobs' rollup rows once its agent
    # reported activity (16 then); its maintenance windows (one; two more once it has one)
    "/nodes/{node}/": 15,
    # its live JSON: the node, its slots, holders and events, and its maintenance windows (one;
    # two more once it has one), so a window cancelled on the page shows as cancelled
    "/ui/nodes/{node}.json": 9,
}


def load(client_for, submit_as, samples, jobs: int) -> dict[str, int]:
    for i in range(jobs):
        submit_as("alice" if i % 2 else "bob", name=f"j{i}", gpus=1 + i % 8)
    run_cycle("test", now=timezone.now() - timedelta(minutes=2))
    # the utilization chart and costs read the rollups (a report covers whole minutes rolled)
    accounting.roll_up(timezone.now())
    samples(50, every=timedelta(minutes=1))
    counts = {}
    client = client_for("admin")
    # A running job: its page also draws the nodes it runs on (two queries more than a waiting one's).
    job = Job.objects.filter(state=JobState.RUNNING).order_by("pk").first().pk
    # the node of that job: its page lists the jobs on it
    node = Node.objects.get(pk=AllocationGpu.objects.filter(allocation__job_id=job, live=True).values("node_id")[:1])
    ids = ",".join(str(j.pk) for j in client.get("/jobs/").context["jobs"])
    now = timezone.now()
    start = accounting.floor_to(now, accounting.DAY) - timedelta(days=6) + timedelta(hours=13, minutes=30)
    window = f"{accounting.iso(start)},{accounting.iso(now)}"
    for url in PINNED:
        with CaptureQueriesContext(connection) as queries:
            target = url.format(job=job, node=node.name, window=window) + (
                f"?ids={ids}" if url == "/ui/jobs.json" else "")
            assert client.get(target).status_code == 200
        counts[url] = len(queries)
    return counts


def test_pages_keep_their_pinned_query_counts(client_for, submit_as, samples):
    counts = load(client_for, submit_as, samples, jobs=12)
    assert counts == PINNED


def test_query_counts_do_not_grow_with_the_data(client_for, submit_as, samples):
    small = load(client_for, submit_as, samples, jobs=4)
    large = load(client_for, submit_as, samples, jobs=40)
    assert small == large
