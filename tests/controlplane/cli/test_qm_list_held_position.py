"""`qm list` shows a held job's POS as `held`, not a place in the queue: a held job is out of
the queue until released. Before, POS read the engine's rank (after every job in line), a number
beside jobs that are in line, while the jobs page showed it held and the job page said "a held job
is not in line"."""

from __future__ import annotations

import re

import pytest

from controlplane.choices import JobHold
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_list_says_held_where_a_held_job_would_have_a_position(alice_qm, fleet) -> None:
    first = f.make_job(fleet.ml, name="first", pending_code="QuotaExceeded", queue_position=1)
    held = f.make_job(fleet.ml, name="held", pending_code="Held", queue_position=2, hold=JobHold.USER)

    run = alice_qm("list", "--sort", "queue_position")

    assert run.code == 0, run.err
    head = run.out.splitlines()[0]
    start, end = head.index("POS"), head.index("START")

    def cell(job_id: int) -> str:
        line = next(line for line in run.out.splitlines() if re.match(rf"^\s*{job_id}\s", line))
        return line[start:end].strip()

    assert cell(first.pk) == "1", run.out
    assert cell(held.pk) == "held", run.out
