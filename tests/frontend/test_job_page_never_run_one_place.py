"""A job that can never run as asked (CanNeverRun) has one place in the queue: the cycle puts it
after every job that can start, which its queue position and `qm status` say ("3, after every
job that can start"). Its Priority line said a few lines below "1 of 3 in line for the next
cycle", a second rank that read as where it stands. That rank is what its priority alone would
give it, and the page now says so, and that it is placed after every job that can start."""

from __future__ import annotations

import re

import pytest

from controlplane.services.cycle import run_cycle
from controlplane.shared_store import shared_store
from frontend.views import jobs as job_views

pytestmark = pytest.mark.django_db


def _dd(html: str, name: str) -> str:
    found = re.search(rf'<dd id="{name}">(.*?)</dd>', html, re.S)
    assert found is not None, name
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip()


def test_a_job_that_can_never_run_is_not_also_said_to_be_nth_in_line(client_for, submit_as) -> None:
    shared_store().delete_prefix(job_views.QUEUE_ORDER_KEY)
    never = submit_as("alice", name="too-big", gpus=96, gpu_types=("H100-80GB",))  # beyond vision's quota
    fits = submit_as("bob", name="fits", gpus=8, priority_class="batch")
    # a job that can start keeps its plain rank
    assert "in line for the next cycle" in _dd(client_for("bob").get(f"/jobs/{fits.pk}/").content.decode(),
                                                "queue-priority")
    shared_store().delete_prefix(job_views.QUEUE_ORDER_KEY)
    run_cycle("test")
    never.refresh_from_db()
    assert never.pending_code == "CanNeverRun" and not never.pending_resolvable
    client = client_for("alice")
    pages = [client.get(f"/jobs/{never.pk}/").content.decode(),
             client.get(f"/ui/jobs/{never.pk}.json").json()["html"]["job-status"]]
    for html in pages:
        position = _dd(html, "queue-position")
        assert position == f"{never.queue_position}, after every job that can start"
        priority = _dd(html, "queue-priority")
        assert "in line for the next cycle" not in priority, priority
        assert re.search(r"; \d+ of \d+ by priority alone, but as asked it can never run, so the cycle places it "
                         r"after every job that can start \(its queue position\)\.", priority), priority
