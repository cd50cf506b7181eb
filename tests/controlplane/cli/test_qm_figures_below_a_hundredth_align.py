"""A column of figures is right-aligned, so its decimal points line up, `< 0.01` (a few
GPU-seconds, said as the page says them) among them: `qm showback --by job`'s GPU-H column was
left-aligned as soon as one job's read `< 0.01`, its `0.19` and TOTAL's `24.96` beside COST $'s
right-aligned figures, one out of line with the other."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.cli import output
from controlplane.services import accounting
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.slow


def test_a_figure_below_a_hundredth_keeps_its_column_right_aligned() -> None:
    out = io.StringIO()
    output.table([("a", "< 0.01", "0.00"), ("b", "12.40", "24.67"), ("TOTAL", "12.40", "24.67")],
                 ["NAME", "GPU-H", "COST $"], out=out)
    lines = out.getvalue().splitlines()
    gpu_h = [line[7:13] for line in lines[1:]]
    assert gpu_h == ["< 0.01", " 12.40", " 12.40"], out.getvalue()


def test_showback_by_job_lines_up_its_gpu_hours(qm, fleet) -> None:  # noqa: ANN001
    now = timezone.now().replace(microsecond=0)
    start = accounting.floor_to(now, accounting.HOUR) - timedelta(hours=2)
    brief = running_job(fleet.ml, gpus=1, started_at=start, priority_class=fleet.research, name="brief")
    hold(brief, [(fleet.nodes[1], 1)], start, start + timedelta(seconds=10))
    long = running_job(fleet.ml, gpus=1, started_at=start, priority_class=fleet.research, name="long")
    hold(long, [(fleet.nodes[2], 1)], start, start + timedelta(minutes=90))
    accounting.catch_up(now)
    window = f"{start:%Y-%m-%dT%H:%M:%SZ},{start + timedelta(hours=2):%Y-%m-%dT%H:%M:%SZ}"
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "job", "--window", window, extra_env={"COLUMNS": "80"})

    assert r.code == 0, r.err
    lines = r.out.splitlines()
    rows = {line.split()[1]: line for line in lines if line.split()[1:2] in (["brief"], ["long"])}
    total = next(line for line in lines if line.startswith("TOTAL"))
    ends = {rows["brief"].index("< 0.01") + 6, rows["long"].index(" 1.50 ") + 5, total.index(" 1.50 ") + 5}
    assert len(ends) == 1, r.out
