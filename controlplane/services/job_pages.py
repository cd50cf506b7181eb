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
from dataclasses import dataclass

from django.db.models import Max, QuerySet

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


# --------------------------------------------------------------- a list read, kept up to date

def newest_id() -> int:
    """The newest job's id now: a list read now has seen every job up to it, and its live
    update asks for the jobs after it (`news`). Ids grow with each submit (the jobs table's
    sequence), so a job whose id is above it was submitted after the read."""
    return Job.objects.aggregate(newest=Max("pk"))["newest"] or 0  # the primary key's index: one step


def news_in_place(ordering: str, page: int) -> bool:
    """Whether a list's new jobs go into it as they come, or are told as "N new jobs — show".

    In place only on the first page, newest first: their place is its top, above every row read,
    where a reader of that page looks for a job just submitted (as a terminal's `qm jobs`
    shows it first), and the rows read stay in their order below. Anywhere else a new job's
    place is among the rows read (queue order, name, most GPUs) or on another page (page 2,
    newest first): putting it there would move rows under the reader's eyes or cursor, so the
    list says how many there are and links to where they are, as GitHub's and Grafana's lists do."""
    return not ordering and page == 1


@dataclass(frozen=True)
class News:
    """A list's jobs submitted since it was read: how many, and, when they go in place, their
    ids newest first (at most a page of them); `seen`: the newest id accounted for, the next
    read's `after` (the read's own when they are told rather than shown: told until shown)."""

    count: int
    ids: list[int]
    seen: int
    in_place: bool


def news(jobs: QuerySet[Job], after: int, *, in_place: bool, limit: int) -> News:
    """The jobs of `jobs` (the list's, filtered as the reader filtered it) with an id above
    `after`: one query."""
    since = jobs.filter(pk__gt=after)
    if not in_place:
        return News(since.count(), [], after, False)
    ids = list(ids_in_order(since.order_by("-submitted_at", "-id"))[:limit])
    return News(len(ids), ids, max(ids, default=after), True)
