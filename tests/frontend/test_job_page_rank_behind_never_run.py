"""A job that can start, ranked by priority behind a job that can never run as asked, is placed
before it by the cycle: its queue position is its place among the jobs that can start. Its
Priority row said "2 of 2 in line for the next cycle" beside "Queue position 1" (the researcher
audit, 7 Dec); it now says both and why they differ, in `qm explain`'s words
(services/queue_rank_text.py), from the row `GET jobs/priority/` gives (`never_ahead`)."""

from __future__ import annotations

import re

import pytest

from controlplane.services.cycle import run_cycle
from controlplane.services.job_priority import priorities
from controlplane.shared_store import shared_store
from frontend.views import jobs as job_views

pytestmark = pytest.mark.django_db


def _dd(html: str, name: str) -> str:
    found = re.search(rf'<dd id="{name}">(.*?)</dd>', html, re.S)
    assert found is not None, name
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip()


def test_a_job_behind_one_that_can_never_run_says_its_place_among_those_that_can_start(client_for, submit_as) -> None:
    never = submit_as("alice", name="too-big", gpus=96, gpu_types=("H100-80GB",))  # beyond vision's quota
    run_cycle("test")
    never.refresh_from_db()
    assert never.pending_code == "CanNeverRun" and not never.pending_resolvable  # the premise
    behind = submit_as("bob", name="behind", gpus=8, priority_class="batch")  # a lower class: after it by priority
    shared_store().delete_prefix(job_views.QUEUE_ORDER_KEY)

    row = next(r for r in priorities(behind.submitter, [behind.pk]).jobs)
    assert (row["order"], row["never_ahead"]) == (2, 1)
    assert next(r for r in priorities(never.submitter, [never.pk]).jobs)["never_ahead"] == 0

    client = client_for("bob")
    for html in (client.get(f"/jobs/{behind.pk}/").content.decode(),
                 client.get(f"/ui/jobs/{behind.pk}.json").json()["html"]["job-status"]):
        priority = _dd(html, "queue-priority")
        assert "in line for the next cycle" not in priority, priority
        assert re.search(r"; 2 of 2 by priority, 1 among the jobs that can start \(its queue position\): the job ahead "
                         r"of it can never run as asked and the cycle places it after every job that can start\.",
                         priority), priority
