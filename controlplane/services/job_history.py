"""A job's history figures, as `sacct` says them: how long it ran, the GPU-hours it held over all
its runs, and where it ran. The API's job fields (`elapsed_s`, `gpu_hours`, `ran_on`), its
`ran_longer_than_s` filter and `elapsed` ordering, and `qm history` all read them from here.

- elapsed: the latest run, from its start (`started_at`, set at each bind and cleared by a
  requeue, as Slurm's Start) to the job's end (`finished_at`), or to now while it runs or stops;
  None for a job that is not running and never started since it was last queued.
- GPU-hours: the accounting's allocated GPU-seconds of the job (every allocation it ever held,
  from its bind to its release; a gang member that exited early stops counting then), read from
  the day rollups exactly as the job page's cost (`accounting.job_cost`) reads them, ÷ 3,600. It
  is as fresh as the rollup (`rolled_until`, every ~15 s): a job finished a few seconds ago may
  not yet have its last seconds counted.
- ran on: every node the job held a GPU on in any of its runs, released ones included.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

from django.db.models import (
    Case,
    CharField,
    DateTimeField,
    DecimalField,
    DurationField,
    ExpressionWrapper,
    F,
    Q,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast

from controlplane.choices import LIVE_JOB_STATES
from controlplane.models import AllocationGpu, Job, UsageRollup
from controlplane.models.usage import RollupBucket

_HOUR_S = Decimal(3600)
_HOURS_Q = Decimal("0.0001")  # as accounting.job_cost rounds its GPU-hours
_SECONDS = DecimalField(max_digits=20, decimal_places=6)


def elapsed_seconds(job: Job, now: datetime) -> int | None:
    """Whole seconds of the job's latest run: to its end, or to `now` while it holds GPUs."""
    if job.started_at is None:
        return None
    if job.finished_at is not None:
        end = job.finished_at
    elif job.state in LIVE_JOB_STATES:
        end = now
    else:
        return None
    return max(0, int((end - job.started_at).total_seconds()))


def elapsed_expression(now: datetime) -> ExpressionWrapper:
    """elapsed_seconds as SQL (a duration; NULL where it is None), for ordering."""
    end = Case(
        When(finished_at__isnull=False, then=F("finished_at")),
        When(state__in=LIVE_JOB_STATES, then=Value(now, output_field=DateTimeField())),
        default=Value(None, output_field=DateTimeField()),
        output_field=DateTimeField(),
    )
    return ExpressionWrapper(end - F("started_at"), output_field=DurationField())


def ran_longer_than(seconds: int, now: datetime) -> Q:
    """Jobs whose latest run has lasted more than `seconds`: ended runs by their length, runs
    still going by their start (the same rule as elapsed_seconds, index-friendly)."""
    span = timedelta(seconds=seconds)
    return (
        Q(finished_at__isnull=False, started_at__isnull=False, finished_at__gt=F("started_at") + span)
        | Q(finished_at__isnull=True, state__in=LIVE_JOB_STATES, started_at__lt=now - span)
    )


def may_have_run(job: Job) -> bool:
    """False only for a job that can hold no GPU-hours and no nodes: never started, never
    requeued, not running. A page of such jobs (a queue) costs no query for them."""
    return job.started_at is not None or job.requeue_count > 0 or job.state in LIVE_JOB_STATES


def attach_history(jobs: Sequence[Job]) -> None:
    """Set `allocated_gpu_seconds` (a Decimal) and `ran_on` (sorted node names) on each job, in
    one query for the page (none when no job on it ever ran)."""
    ran = [job.pk for job in jobs if may_have_run(job)]
    gpu_seconds: dict[int, Decimal] = {}
    nodes: dict[int, set[str]] = {}
    if ran:
        # One statement for both: the nodes of every GPU row it ever had, and its day rollups'
        # allocated GPU-seconds (accounting.job_cost's very sum), as (job, node, NULL) and
        # (job, NULL, GPU-seconds) rows.
        where = (
            AllocationGpu.objects.filter(allocation__job_id__in=ran).order_by()
            .annotate(j=F("allocation__job_id"), n=F("node__name"), g=Cast(Value(None), _SECONDS))
            .values_list("j", "n", "g").distinct()
        )
        held = (
            UsageRollup.objects.filter(bucket=RollupBucket.DAY, job_id__in=ran).order_by()
            .values(j=F("job_id")).annotate(n=Cast(Value(None), CharField()), g=Sum("allocated_gpu_seconds"))
            .values_list("j", "n", "g")
        )
        for job_id, node, gpu_s in where.union(held, all=True):
            if node is not None:
                nodes.setdefault(job_id, set()).add(node)
            if gpu_s is not None:
                gpu_seconds[job_id] = gpu_seconds.get(job_id, Decimal(0)) + Decimal(str(gpu_s))
    for job in jobs:
        job.allocated_gpu_seconds = gpu_seconds.get(job.pk, Decimal(0))  # type: ignore[attr-defined]
        job.ran_on = sorted(nodes.get(job.pk, ()))  # type: ignore[attr-defined]


def _attached(job: Job) -> Job:
    if getattr(job, "ran_on", None) is None:
        attach_history([job])
    return job


def gpu_hours(job: Job) -> float:
    """The job's allocated GPU-hours so far (4 decimals), read with its page or on its own."""
    seconds: Decimal = _attached(job).allocated_gpu_seconds  # type: ignore[attr-defined]
    return float((seconds / _HOUR_S).quantize(_HOURS_Q))


def ran_on(job: Job) -> list[str]:
    return list(_attached(job).ran_on)  # type: ignore[attr-defined]


def lost_gpu_hours(job: Job) -> float:
    """The work its preemptions and other requeues threw away (`lost_gpu_seconds`), in hours."""
    return round(float(job.lost_gpu_seconds) / 3600, 4)

