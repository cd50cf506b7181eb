"""`qm runs JOB`'s GPU-H cells add up to its totals line, as the job page's rows add up to its
total (`run_text.rounded_cumulatively`, the one rule both use). Until 7 Dec qm rounded each run's
on its own: two runs of 51 GPU-seconds read 0.01 and 0.01 above "0.03 GPU-hours held" (their
exact sum, 0.0283, rounded once). A run whose share rounds to nothing still reads "< 0.01",
never 0."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from controlplane.services import transitions
from tests.controlplane import factories as f
from tests.controlplane.job_runs_story import bind_at

pytestmark = pytest.mark.slow

#: GPU-H is the 12th column (cli/jobs/runs.RUNS_COLUMNS).
GPU_H = 11


def _ran_for(fleet: Any, name: str, seconds: list[int]) -> Any:
    """A 1-GPU job that ran once for each of `seconds`, ten minutes apart, an hour ago."""
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name=name, gpus=1)
    t0 = timezone.now() - timedelta(hours=1)
    for i, held in enumerate(seconds):
        at = t0 + timedelta(minutes=10 * i)
        run = bind_at(job, [(fleet.nodes[1], [0], "")], at=at)
        if i < len(seconds) - 1:
            assert transitions.signal_stop(run.pk, run.generation, reason=transitions.RELEASE_PREEMPTED,
                                           grace_period_s=30, at=at + timedelta(seconds=held - 5), actor="scheduler",
                                           message="Preempted")
        assert transitions.complete_release(run.pk, exit_code=0, at=at + timedelta(seconds=held), actor="agent:test")
    return job


def _gpu_h_cells(out: str) -> list[str]:
    rows = [line for line in out.splitlines()[1:] if line.lstrip()[:1].isdigit() and "GPU-hours held" not in line]
    return [[c.strip() for c in row.split("  ") if c.strip()][GPU_H] for row in rows]


def _total(out: str) -> str:
    line = next(line for line in out.splitlines() if " GPU-hours held, costing " in line)
    return line.split("; ")[1].split(" GPU-hours held")[0]


def test_the_runs_gpu_hours_add_up_to_the_total_line(alice_qm, fleet) -> None:
    job = _ran_for(fleet, "short-twice", [51, 51])  # 2 × 51 GPU-s: 0.0142 + 0.0142 = 0.0283 GPU-hours

    run = alice_qm("runs", str(job.pk))

    assert run.code == 0, run.err
    cells = _gpu_h_cells(run.out)
    assert cells == ["0.01", "0.02"], run.out
    assert _total(run.out) == "0.03"
    assert sum(Decimal(c) for c in cells) == Decimal(_total(run.out))


def test_a_run_whose_share_rounds_to_nothing_reads_less_than_a_hundredth(alice_qm, fleet) -> None:
    # 58 GPU-s (0.0161) then 10 (0.0028): through the first 0.02, through both 0.0189, still 0.02
    job = _ran_for(fleet, "then-a-blink", [58, 10])

    run = alice_qm("runs", str(job.pk))

    assert run.code == 0, run.err
    assert _gpu_h_cells(run.out) == ["0.02", "< 0.01"], run.out
    assert _total(run.out) == "0.02"


def test_one_run_of_a_few_gpu_seconds_is_less_than_a_hundredth_not_nothing(alice_qm, fleet) -> None:
    job = _ran_for(fleet, "blink", [10])

    run = alice_qm("runs", str(job.pk))

    assert run.code == 0, run.err
    assert _gpu_h_cells(run.out) == ["< 0.01"], run.out
    assert _total(run.out) == "less than 0.01"
