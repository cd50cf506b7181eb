"""What the `qm showback` tests share: one job of team ml that held GPUs for a while and
reported useful tokens, rolled up by the accounting; and a row of the printed table, read by
its column headings."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any


def ml_job_ran(fleet: Any, *, gpus: int, start: datetime, held: timedelta, tokens_per_s: float,
               rolled_up_to: datetime) -> None:
    """A research job of ml on node 1 held `gpus` GPUs from `start` for `held`, reporting
    `tokens_per_s`; the accounting then rolled up to `rolled_up_to`."""
    from controlplane.models import Allocation
    from controlplane.services import accounting
    from tests.controlplane.accounting.builders import hold, report, running_job

    job = running_job(fleet.ml, gpus=gpus, started_at=start, priority_class=fleet.research)
    hold(job, [(fleet.nodes[1], gpus)], start, start + held)
    report(Allocation.objects.get(job=job), fleet.nodes[1], start, start + held, tokens_per_s=tokens_per_s)
    accounting.catch_up(rolled_up_to)


def table_columns(out: str) -> list[str]:
    """The headings of the table under the report's first line."""
    return re.split(r"\s{2,}", out.splitlines()[1].strip())


def table_row(out: str, name: str) -> dict[str, str]:
    """The row of `name` (team, project, ...), cell by heading."""
    columns = table_columns(out)
    cells = next(re.split(r"\s{2,}", line.strip()) for line in out.splitlines()[2:] if line.startswith(f"{name} "))
    return dict(zip(columns, cells, strict=True))
