"""`qm list` and `qm status` show the GPUs a job holds now beside the GPUs it asked for: an
elastic job asking 8 (4–16) grown to 16 or shrunk to 4 showed 8 (found by QA)."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Job, Node
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def hold(job: Job, placement: list[tuple[Node, int]], generation: int) -> None:
    allocation = Allocation.objects.create(job=job, generation=generation, epoch=1, created_at=timezone.now())
    AllocationGpu.objects.bulk_create(
        AllocationGpu(allocation=allocation, node=node, gpu_index=i) for node, n in placement for i in range(n)
    )


@pytest.fixture
def jobs(fleet) -> dict[str, Job]:
    n = fleet.nodes
    grown = f.make_job(fleet.ml, name="grown", gpus=8, min_gpus=4, max_gpus=16, state=JobState.RUNNING)
    hold(grown, [(n[0], 8), (n[1], 8)], 1)
    shrunk = f.make_job(fleet.ml, name="shrunk", gpus=8, min_gpus=4, max_gpus=16, state=JobState.RUNNING)
    hold(shrunk, [(n[2], 4)], 2)
    rigid = f.make_job(fleet.ml, name="rigid", gpus=2, state=JobState.RUNNING)
    hold(rigid, [(n[3], 2)], 3)
    waiting = f.make_job(fleet.ml, name="waiting", gpus=8, min_gpus=4, max_gpus=16)
    return {"grown": grown, "shrunk": shrunk, "rigid": rigid, "waiting": waiting}


def _gpus_cells(out: str) -> dict[str, str]:
    lines = out.splitlines()
    header = lines[0]
    start = header.index("GPUS")
    end = header.index("PRIORITY")
    cells = {}
    for line in lines[1:]:
        parts = line.split()
        if len(parts) > 2 and parts[0].isdigit():
            cells[parts[1]] = line[start:end].strip()
    return cells


def test_list_shows_held_of_asked_for_elastic_jobs_holding_gpus(alice_qm, jobs) -> None:
    r = alice_qm("list")

    assert r.code == 0, r.err
    assert _gpus_cells(r.out) == {"grown": "16/8", "shrunk": "4/8", "rigid": "2", "waiting": "8"}
    assert "held/asked" in r.out  # the table says what 16/8 means


def test_the_gpus_column_stays_right_aligned_beside_held_of_asked_cells(alice_qm, jobs) -> None:
    """Counts line up at the right as the other figures do: a `16/8` cell left-aligned the whole
    column (`2` under `16/8` at its left edge)."""
    r = alice_qm("list")

    lines = r.out.splitlines()
    header = lines[0]
    end = header.index("GPUS") + len("GPUS")
    cells = {line.split()[1]: line[:end] for line in lines[1:] if line.split() and line.split()[0].isdigit()}
    assert {name: cell[-4:] for name, cell in cells.items()} == {
        "grown": "16/8", "shrunk": " 4/8", "rigid": "   2", "waiting": "   8"}, r.out


def test_list_without_elastic_jobs_holding_gpus_has_no_legend(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, name="rigid", gpus=2, state=JobState.RUNNING)
    hold(job, [(fleet.nodes[0], 2)], 1)
    r = alice_qm("list")
    assert r.code == 0 and _gpus_cells(r.out) == {"rigid": "2"} and "held/asked" not in r.out


@pytest.mark.parametrize(("name", "line"), [
    ("grown", "16 held (asked 8, elastic 4–16)"),
    ("shrunk", "4 held (asked 8, elastic 4–16)"),
    ("rigid", "2 held (asked 2)"),
    ("waiting", "none held (asked 8, elastic 4–16)"),
])
def test_status_says_how_many_gpus_the_job_holds_and_asked(alice_qm, jobs, name, line) -> None:
    r = alice_qm("status", str(jobs[name].pk))

    assert r.code == 0, r.err
    assert re.search(rf"^gpus:\s+{re.escape(line)}$", r.out, re.M), r.out


def test_list_json_carries_gpus_held(alice_qm, jobs) -> None:
    rows = {row["name"]: row for row in alice_qm("list", "--json").json()["results"]}
    assert {name: (row["gpus"], row["gpus_held"]) for name, row in rows.items()} == {
        "grown": (8, 16), "shrunk": (8, 4), "rigid": (2, 2), "waiting": (8, 0)}
