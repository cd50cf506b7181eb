"""A job requeued off its run and then cancelled before it ran again has no latest run: its
start is cleared by the requeue, so the history's START (Started) and ELAPSED read "-", while its
GPUS, GPU-H and NODES came from the run before. The row read as a run with no start. Both the
`/history/` page and `qm history` now say it under the table, in the same words: which jobs
ended waiting after a requeue, and that their GPUs, GPU-hours and nodes are their earlier runs'."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.models import Allocation, AllocationGpu
from controlplane.services.history_text import ended_waiting_after_requeue
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow

SAID = ("ended waiting to run again after a requeue: no run of it started since, so no start or elapsed "
        "time; the GPUs, GPU-hours and nodes shown are of its earlier runs")


def test_a_job_cancelled_after_a_requeue_is_said_alike_on_the_page_and_by_qm(alice_qm, fleet) -> None:
    now = timezone.now()
    alice = fleet.users["owner"]
    requeued = f.make_job(fleet.ml, name="requeued", gpus=2, submitter=alice, state=JobState.CANCELLED,
                          started_at=None, requeue_count=1, submitted_at=now - timedelta(hours=3),
                          finished_at=now - timedelta(minutes=5))
    run = Allocation.objects.create(job=requeued, generation=1, epoch=1, created_at=now - timedelta(hours=2),
                                    started_at=now - timedelta(hours=2), released_at=now - timedelta(hours=1),
                                    state=AllocationState.RELEASED)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=run, node=fleet.nodes[1], gpu_index=i, live=False)
                                      for i in range(2))
    ran = f.make_job(fleet.ml, name="ran", submitter=alice, state=JobState.SUCCEEDED, exit_code=0,
                     started_at=now - timedelta(hours=1), finished_at=now - timedelta(minutes=4))
    never = f.make_job(fleet.ml, name="never", submitter=alice, state=JobState.CANCELLED,
                       finished_at=now - timedelta(minutes=3))
    words = f"Job {requeued.pk} {SAID}."
    assert ended_waiting_after_requeue([requeued.pk]) == words

    history = alice_qm("history", "--since", "4h")
    assert history.code == 0, history.err
    assert words in " ".join(history.out.split()), history.out
    assert f"Jobs {requeued.pk}" not in history.out  # the one job, not those that ran or never ran
    assert str(ran.pk) in history.out and str(never.pk) in history.out

    page = Client()
    page.force_login(alice)
    html = page.get("/history/").content.decode()
    assert f'<p class="note" id="history-requeued">{words}</p>' in html, html[-3000:]


def test_two_jobs_are_named_together() -> None:
    assert ended_waiting_after_requeue([4, 9]).startswith("Jobs 4, 9 ended waiting to run again after a requeue")
    assert "are of their earlier runs" in ended_waiting_after_requeue([4, 9])
    assert ended_waiting_after_requeue([]) == ""
