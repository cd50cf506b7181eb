"""The overview's "GPU-hours lost today" tile says what it counts: the work since the last
checkpoint of jobs preempted, requeued or resized (`fleet_series.lost_work_since` adds the
`lost_gpu_seconds` of `job.preempted`, `job.requeued` and `job.resized`). Found by the operator
review (7 Dec): its sub-line said "preempted or requeued jobs" while a resize's lost work was in
the figure."""

from __future__ import annotations

import re

from django.utils import timezone

from tests.frontend.page_data import preempted_event


def test_a_resize_s_lost_work_is_in_the_tile_and_its_words_say_resized(client_for, submit_as) -> None:
    job = submit_as("alice")
    preempted_event(job, timezone.now(), 7200.0, kind="job.resized")
    alice = client_for("alice")

    assert alice.get("/ui/overview.json").json()["text"]["lost_gpu_hours_today"] == "2.0"
    html = alice.get("/").content.decode()
    tile = re.search(r'data-live="lost_gpu_hours_today">[^<]*</span>\s*<span class="sub">(.*?)</span>', html, re.S)
    assert tile, html[:500]
    assert " ".join(tile.group(1).split()) == "work since the last checkpoint of jobs preempted, requeued or resized"
