"""The jobs list and a job's page show the GPUs a job holds now beside the GPUs it asked for:
an elastic job asking 8 (4–16) grown to 16 or shrunk to 4 read "8 GPUs" (found by QA)."""

from __future__ import annotations

import re

import pytest
from django.db.models import Max
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def hold(job: Job, placement: list[tuple[Node, int]]) -> None:
    generation = (Allocation.objects.aggregate(g=Max("generation"))["g"] or 0) + 1
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=timezone.now())
    AllocationGpu.objects.bulk_create(
        AllocationGpu(allocation=allocation, node=node, gpu_index=i) for node, n in placement for i in range(n)
    )


@pytest.fixture
def jobs(demo) -> dict[str, Job]:
    vision = Team.objects.get(name="vision")
    n = list(Node.objects.filter(gpu_count__gte=8).order_by("name")[:4])
    now = timezone.now()
    grown = f.make_job(vision, name="grown", gpus=8, min_gpus=4, max_gpus=16, state=JobState.RUNNING, started_at=now)
    hold(grown, [(n[0], 8), (n[1], 8)])
    shrunk = f.make_job(vision, name="shrunk", gpus=8, min_gpus=4, max_gpus=16, state=JobState.RUNNING,
                        started_at=now)
    hold(shrunk, [(n[2], 4)])
    rigid = f.make_job(vision, name="rigid", gpus=2, state=JobState.RUNNING, started_at=now)
    hold(rigid, [(n[3], 2)])
    waiting = f.make_job(vision, name="waiting", gpus=8, min_gpus=4, max_gpus=16)
    return {"grown": grown, "shrunk": shrunk, "rigid": rigid, "waiting": waiting}


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html)).strip()


def _row(page: str, job: Job) -> str:
    match = re.search(rf'<tr data-job="{job.pk}">(.*?)</tr>', page, re.S)
    assert match, f"job {job.pk} is not listed"
    return _text(match.group(1))


def test_jobs_list_shows_held_gpus_of_elastic_jobs_beside_what_they_asked(client_for, jobs) -> None:
    page = client_for("alice").get("/jobs/").content.decode()

    assert "16 GPUs held (asked 8, elastic 4–16)" in _row(page, jobs["grown"])
    assert "4 GPUs held (asked 8, elastic 4–16)" in _row(page, jobs["shrunk"])
    assert "2 GPUs" in _row(page, jobs["rigid"]) and "held" not in _row(page, jobs["rigid"])
    assert "8 GPUs" in _row(page, jobs["waiting"]) and "held" not in _row(page, jobs["waiting"])


@pytest.mark.parametrize(("name", "says", "running_on"), [
    ("grown", "16 held now · asked 8 (elastic 4–16)", "on 16 GPUs"),
    ("shrunk", "4 held now · asked 8 (elastic 4–16)", "on 4 GPUs"),
    ("rigid", "2 held now · asked 2", "on 2 GPUs"),
    ("waiting", "none held · asked 8 (elastic 4–16)", None),
])
def test_job_page_and_its_live_update_show_held_and_asked_gpus(client_for, jobs, name, says, running_on) -> None:
    client = client_for("alice")
    job = jobs[name]
    page = _text(client.get(f"/jobs/{job.pk}/").content.decode())
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]

    assert f"GPUs {says}" in page
    assert _text(live["job-gpus"]) == says
    if running_on:
        assert running_on in page and running_on in _text(live["job-status"])


def test_a_jobs_cost_says_gpu_hours_by_the_pages_one_rule(client_for, submit_as):
    """'8.0 allocated', '0.05 active', '< 0.01 productive' — as the showback says them — not
    the rollup's four places ('8.0000 allocated · 0.0000 productive')."""
    from datetime import timedelta

    from django.utils import timezone

    from controlplane.services import accounting
    from controlplane.services.cycle import run_cycle

    job = submit_as("alice", name="costed", gpus=8)
    run_cycle("test", now=timezone.now() - timedelta(hours=1))
    accounting.catch_up(timezone.now())
    html = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
    said = re.search(r'<dt>GPU-hours</dt><dd id="job-gpu-hours">(.*?)</dd>', html).group(1)
    # allocated: its runs' total to now, with their two decimals (test_job_page_gpu_hours_add_up.py)
    assert re.fullmatch(r"[\d,]+\.\d\d allocated to now \(all its runs, as under Runs\) · "
                        r"(0|< 0\.01|[\d,]+\.\d|0\.\d\d) active · (0|< 0\.01|[\d,]+\.\d|0\.\d\d) productive", said), said
    assert said.startswith("8.0"), said
