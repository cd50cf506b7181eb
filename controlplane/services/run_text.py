"""How a job's run is named, in one place: the job logs' notices and refusals
(services/job_logs.py: the API, `qm logs`, the job page's Output panel) and `qm logs -f`'s
"--- job 12 runs again: run 2 (lease generation 31) ---". `qm` imports no Django, and neither
does this module.

A run is named by its number in the job and its lease generation, as the job page's Run select
says it ("run 2 · lease generation 31"). The generation alone ("Rank 5 of generation 31 has
written nothing yet", until 7 Dec) read as the job's 31st run: it is a fleet-wide lease counter,
the fencing token `?generation=` and `qm logs --generation` take, not a run count.
"""

from __future__ import annotations


def run_named(generations: list[int], generation: int, *, job: int | None = None) -> str:
    """"run 2 (lease generation 31)", or with `job` "run 2 of job 12 (lease generation 31)":
    `generations` are the job's runs, oldest first (the API's `generations`), one of them
    `generation`."""
    of_job = f" of job {job}" if job is not None else ""
    return f"run {generations.index(generation) + 1}{of_job} (lease generation {generation})"
