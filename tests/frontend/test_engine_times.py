"""The engine counts time in seconds (`t=…`); in the control plane those are Unix seconds. The
pages say them as UTC times, never as a raw count a reader cannot read."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest
from django.contrib.auth import get_user_model

from controlplane.choices import JobState
from controlplane.models import Event, Job
from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from frontend.templatetags.qm import engine_times, utc

pytestmark = pytest.mark.django_db

RAW_T = re.compile(r"\bt=\d{6,}")


def test_engine_times_become_utc_and_small_counts_stay():
    assert engine_times("Estimated start t=1795989660 from runtime limits.") == (
        "Estimated start 2026-11-29 22:01:00 UTC from runtime limits.")
    assert engine_times("starts at t=1795989660; by t=1795989720.") == (
        "starts at 2026-11-29 22:01:00 UTC; by 2026-11-29 22:02:00 UTC.")
    # A simulator's offsets from its origin are not wall times: left as they are.
    assert engine_times("Estimated start t=3600 from runtime limits.") == "Estimated start t=3600 from runtime limits."
    assert engine_times("") == ""
    # A count no date can hold stays as it is rather than failing the page.
    assert engine_times("by t=99999999999999999999.") == "by t=99999999999999999999."
    assert datetime.fromtimestamp(1795989660, timezone.utc).strftime("%H:%M:%S") == "22:01:00"


def test_utc_times_round_to_the_nearest_second_as_the_engine_does():
    assert utc(datetime(2026, 11, 30, 0, 50, 6, 672_000, tzinfo=timezone.utc)) == "2026-11-30 00:50:07 UTC"
    assert utc(datetime(2026, 11, 30, 0, 50, 6, 200_000, tzinfo=timezone.utc)) == "2026-11-30 00:50:06 UTC"
    assert engine_times(f"t={datetime(2026, 11, 30, 0, 50, 6, 672_000, tzinfo=timezone.utc).timestamp():.0f}") == (
        "2026-11-30 00:50:07 UTC")


def test_a_waiting_jobs_page_and_list_say_its_estimated_start_in_utc(client_for):
    alice = get_user_model().objects.get(username="alice")
    # vision: 8 A100-40GB GPUs of quota and 8 more it may borrow; the third gang of 8 must wait
    # for one of the first two to reach its runtime limit.
    for i in range(3):
        submit(alice, SubmitRequest(name=f"a100-{i}", gpus=8, gpu_types=("A100-40GB",), runtime_limit_s=3600))
    run_cycle("test")
    waiting = list(Job.objects.filter(name__startswith="a100-", state=JobState.PENDING))
    assert len(waiting) == 1
    job = waiting[0]
    assert RAW_T.search(job.pending_message), job.pending_message  # the engine's words, as stored
    said = Event.objects.filter(job=job, kind="job.pending").values_list("message", flat=True).first()
    assert said and RAW_T.search(said)

    client = client_for("alice")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert job.pending_code in page
    assert not RAW_T.search(page), RAW_T.search(page)
    seconds = int(RAW_T.search(job.pending_message).group()[2:])
    said_utc = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    assert said_utc in page
    # The ETA beside the sentence names the same second (the engine rounds t= to the nearest
    # second; the ETA, cut to its second, read a second earlier: "start 00:50:07", "ETA 00:50:06").
    assert re.search(r'<dd id="eta">' + re.escape(utc(job.eta)), page)
    assert utc(job.eta) == utc(datetime.fromtimestamp(round(job.eta.timestamp()), timezone.utc))
    live = client.get(f"/ui/jobs/{job.pk}.json").json()
    assert not RAW_T.search(live["html"]["job-status"] + live["html"]["job-events"])
    assert not RAW_T.search(str(live["charts"]))  # the timeline's hover words
    cells = client.get(f"/ui/jobs.json?ids={job.pk}").json()["html"]
    assert not RAW_T.search(cells[f"job-state-{job.pk}"])
    assert not RAW_T.search(client.get("/jobs/").content.decode())
