"""How a job's runs are named and their figures said, in one place. `qm` imports no Django, and
neither does this module.

A run's name: the job logs' notices and refusals (services/job_logs.py: the API, `qm logs`, the
job page's Output panel) and `qm logs -f`'s "--- job 12 runs again: run 2 (lease generation 31) ---".

A run is named by its number in the job and its lease generation, as the job page's Run select
says it ("run 2 · lease generation 31"). The generation alone ("Rank 5 of generation 31 has
written nothing yet", until 7 Dec) read as the job's 31st run: it is a fleet-wide lease counter,
the fencing token `?generation=` and `qm logs --generation` take, not a run count.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

#: GPU-hours as a row of runs says them: two decimals (sentences.gpu_hours).
HUNDREDTH = Decimal("0.01")


def run_named(generations: list[int], generation: int, *, job: int | None = None) -> str:
    """"run 2 (lease generation 31)", or with `job` "run 2 of job 12 (lease generation 31)":
    `generations` are the job's runs, oldest first (the API's `generations`), one of them
    `generation`."""
    of_job = f" of job {job}" if job is not None else ""
    return f"run {generations.index(generation) + 1}{of_job} (lease generation {generation})"


def rounded_cumulatively(amounts: Sequence[Decimal | int], quantum: Decimal, per: Decimal | int = 1) -> list[Decimal]:
    """Each of `amounts` (a job's runs, in bind order) ÷ `per`, rounded to `quantum` so the rounded
    figures add up to their exact sum rounded once: each is the running total through it rounded
    (half to even), less the one through the amount before. Each is within a `quantum` of its own
    rounding, and an earlier one never moves while a later one grows. The runs' cents and
    GPU-hours on the job page and in the API (`job_costs.run_costs`) and `qm runs`' GPU-H cells:
    until 7 Dec two runs of 51 GPU-seconds read 0.01 and 0.01 above a total of 0.03. `per`
    divides the running total once, so exact sums (GPU-µs × $/GPU-hour) round as their
    exact figure does."""
    running: Decimal = Decimal(0)
    shown = Decimal(0).quantize(quantum)
    shares = []
    for amount in amounts:
        running += amount
        through = (running / per).quantize(quantum)
        shares.append(through - shown)
        shown = through
    return shares


def share_said(share: Decimal, exact: float | Decimal) -> float | Decimal:
    """What a row (or a total) of `rounded_cumulatively`'s says: its rounded share, but a non-zero
    amount whose share rounded to nothing is said as itself, so a few GPU-seconds read "< 0.01"
    (sentences.gpu_hours), never 0."""
    return exact if not share and exact else share
