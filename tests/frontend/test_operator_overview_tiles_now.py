"""The overview's tiles count the fleet and the queue now, as the heat map beside them, the Jobs and
Nodes pages and the API do (operator review, 6 Dec).

On the demo, polling `/ui/overview.json` beside `metrics/fragmentation/` every 1.5 s, 20 of 40
polls read another stranded count on the tile than the API (tile 10, API 7 with 7 GPUs free: more
stranded than free), and "GPUs allocated 110" beside a heat map of 121 held GPUs on the same page:
the tiles read the last cycle's sample, taken at most every 5 s, while jobs are submitted and end
between cycles. They now read the live figures (`fleet_figures.queue_figures`,
`fleet_figures.fragmentation_of` on the heat map's own rows); the oldest feasible wait stays the
cycle's finding, and the line under the tiles says which is which.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from controlplane.models import FleetSample
from controlplane.services.cycle import run_cycle


def test_operator_the_tiles_count_what_the_api_and_the_heat_map_count_between_cycles(
    client_for: Any, submit_as: Any,
) -> None:
    submit_as("alice", name="small", gpus=3, gpu_types=("H100-80GB",))
    run_cycle("test", now=timezone.now() - timedelta(seconds=30))
    sample = FleetSample.objects.get()
    assert (sample.pending_jobs, sample.running_jobs, sample.stranded_gpus) == (0, 1, 0)
    # Between two cycles: a job needing a whole node waits, so the 5 idle GPUs beside the small
    # job are stranded now; a second small job waits too.
    submit_as("bob", name="whole", gpus=8, gpus_per_node=8)
    submit_as("bob", name="later", gpus=1)

    admin = client_for("admin")
    text = admin.get("/ui/overview.json").json()["text"]
    queue = admin.get("/api/v1/metrics/queue/").json()
    fragmentation = admin.get("/api/v1/metrics/fragmentation/").json()
    pending = admin.get("/api/v1/jobs/", {"state": "pending"}).json()["count"]

    assert fragmentation["stranded_gpus"] == 5 and pending == 2  # the test's premise
    assert text["pending_jobs"] == str(queue["pending_jobs"]) == str(pending)
    assert text["running_jobs"] == str(queue["running_jobs"]) == "1"
    assert text["stranded_gpus"] == str(fragmentation["stranded_gpus"])
    assert text["allocated_gpus"] == str(fragmentation["allocated_gpus"]) == "3"
    assert int(text["stranded_gpus"]) <= fragmentation["free_gpus"]

    page = admin.get("/").content.decode()
    assert 'data-live="stranded_gpus">5<' in page and 'data-live="pending_jobs">2<' in page
    assert "The tiles count now" in page


def test_operator_the_oldest_wait_is_the_last_cycles_and_a_stalled_loop_says_what_is_old(
    client_for: Any, submit_as: Any,
) -> None:
    submit_as("bob", name="whole", gpus=8, gpus_per_node=8)
    run_cycle("test", now=timezone.now() - timedelta(minutes=3))
    text = client_for("admin").get("/ui/overview.json").json()["text"]
    assert "has not run" in text["loop"]
    assert "the other tiles count now" in text["loop"] and "every figure" not in text["loop"]
