"""A page of a job list in two reads: the page's ids in the list's order, read from the jobs
table alone (and only the tables its ordering names), then those jobs with their team, project,
submitter, class, place and holder.

One read of the page with its related rows made PostgreSQL join every job of the list to
those six tables before sorting them for the page, whenever the order was not an index's
(`?ordering=-gpus`, `name`, `state`, `priority`, `elapsed`, and `started_at` or `finished_at`
with their rows without a time last): 300-450 ms for a page of 50 of 107,000 jobs
(bench/scale_audit.py). The API's jobs list and the jobs page read their pages so.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import QuerySet

from controlplane.models import Job


def ids_in_order(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """The list's ids, in its order, to paginate (values_list drops the related rows; filters,
    annotations and ordering stay)."""
    return jobs.values_list("pk", flat=True)  # type: ignore[return-value]


def jobs_of_page(jobs: QuerySet[Job], ids: Sequence[int]) -> list[Job]:
    """The page's jobs, each as `jobs` reads it, in the order of `ids` (a job deleted between
    the two reads is left out)."""
    by_id = {job.pk: job for job in jobs.filter(pk__in=list(ids)).order_by()}
    return [by_id[pk] for pk in ids if pk in by_id]
