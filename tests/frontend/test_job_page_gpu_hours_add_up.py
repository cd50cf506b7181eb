"""A job's GPU-hours on its page are its runs' GPU-hours added up, visibly. Until 7 Dec the page
said "GPU-hours 0.03 allocated" (the accounting's rollup of the whole job) above two runs of 51
GPU-seconds each that read 0.01 and 0.01, each rounded on its own: a reader adding them up got
0.02. Now the runs' figures are rounded cumulatively in bind order (as their cents are), so they
add up to the job's, which is their exact sum rounded once (`job_costs.run_costs`)."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone
from django.utils.html import strip_tags

from controlplane.services import accounting, transitions
from tests.controlplane.job_runs_story import NOTICE, bind_at, idle_nodes

pytestmark = pytest.mark.django_db


def _twice_for_51_seconds(submit_as):  # type: ignore[no-untyped-def]
    job = submit_as("alice", name="short-twice", gpus=1)
    node, = idle_nodes(1)
    t0 = timezone.now() - timedelta(hours=1)
    first = bind_at(job, [(node, [0], "")], at=t0)
    assert transitions.signal_stop(first.pk, first.generation, reason=transitions.RELEASE_PREEMPTED,
                                   grace_period_s=30, at=t0 + timedelta(seconds=41), actor="scheduler", message=NOTICE)
    assert transitions.complete_release(first.pk, exit_code=143, at=t0 + timedelta(seconds=51), actor="agent:test")
    second = bind_at(job, [(node, [0], "")], at=t0 + timedelta(minutes=10))
    assert transitions.complete_release(second.pk, exit_code=0, at=t0 + timedelta(minutes=10, seconds=51),
                                        actor="agent:test")
    return job


def test_the_jobs_gpu_hours_are_its_runs_added_up(client_for, submit_as) -> None:
    job = _twice_for_51_seconds(submit_as)  # 2 × 51 GPU-s: 0.0142 + 0.0142 = 0.0283 GPU-hours
    accounting.catch_up(timezone.now())

    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    runs = [strip_tags(cells[9]) for cells in (
        re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)
        for row in re.findall(r'<tr id="run-\d+"[^>]*>(.*?)</tr>', html, re.S))]
    total = re.search(r"<dt>GPU-hours</dt><dd[^>]*>([\d.,]+) allocated", html)
    assert total is not None, html.split('id="job-cost"')[1][:800]
    assert total.group(1) == "0.03"
    assert runs == ["0.01", "0.02"], runs
    assert sum(Decimal(r) for r in runs) == Decimal(total.group(1))
    assert "All 2 runs held 0.03 GPU-hours and cost" in strip_tags(html)


def test_a_few_gpu_seconds_read_less_than_a_hundredth_not_nothing(client_for, submit_as) -> None:
    job = submit_as("alice", name="blink", gpus=1)
    node, = idle_nodes(1)
    t0 = timezone.now() - timedelta(hours=1)
    run = bind_at(job, [(node, [0], "")], at=t0)
    assert transitions.complete_release(run.pk, exit_code=0, at=t0 + timedelta(seconds=10), actor="agent:test")

    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    row = re.search(r'<tr id="run-1"[^>]*>(.*?)</tr>', html, re.S)
    assert row is not None
    assert strip_tags(re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(1), re.S)[9]) == "&lt; 0.01"
    assert re.search(r'<dd id="job-gpu-hours">&lt; 0\.01 allocated \(all its runs', html), html.split('id="job-cost"')[1][:600]
    assert "Its one run held &lt; 0.01 GPU-hours and cost" in html
