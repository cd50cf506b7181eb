"""How far the ETAs the scheduler tells waiting jobs have held: its track record.

Each job keeps the first ETA it was told in the wait that ended in its latest start
(`Job.eta_told`, copied from its PendingPlace at the bind) and when it was told
(`Job.eta_told_at`). The engine computes an ETA from running jobs' runtime limits and the queue
as it stands, so it is close to an upper bound: jobs usually start sooner, and later only when
the fleet or the queue ahead changed after it was told (jobs submitted later went first by
priority, fair share or aging; a reservation moved; a node left). The record says how often and by how much, so a researcher reading "ETA in 6 h" knows what that has
meant on this fleet. The simulator measures the same on replays, by the same rule
(scheduler_core/judging.py: judge_etas)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, F, Q
from django.utils import timezone

from controlplane.models import Job
from scheduler_core.judging import ETA_SLACK_S as SLACK_S  # the replays' rule: on time within a second
from scheduler_core.judging import judge_etas

DEFAULT_DAYS = 7
MAX_DAYS = 90


@dataclass(frozen=True)
class EtaRecord:
    """The ETAs told to the jobs that started in ``[since, until)`` after waiting with one.

    ``on_time``: the share that started no later than told. ``median_share_of_wait``: the
    median of (actual wait ÷ wait told), both counted from when the ETA was first told: 0.4
    means the median job started after 40 % of the wait it was told. ``median_early_s``: how
    much sooner than told the median on-time job started; ``late_p95_s`` and ``late_max_s``: the
    lateness over all of them (zero for those on time). ``None`` when no job is judged."""

    since: datetime
    until: datetime
    judged: int
    on_time: float | None
    median_share_of_wait: float | None
    median_early_s: float | None
    late_p95_s: float | None
    late_max_s: float | None

    @property
    def days(self) -> int:
        return round((self.until - self.since).total_seconds() / 86400)


def track_record(*, days: int = DEFAULT_DAYS, now: datetime | None = None) -> EtaRecord:
    """The fleet's record over the last ``days`` (one query)."""
    until = now or timezone.now()
    since = until - timedelta(days=days)
    rows = list(Job.objects.filter(started_at__gte=since, started_at__lt=until, eta_told__isnull=False,
                                   eta_told_at__isnull=False)
                .values_list("started_at", "eta_told", "eta_told_at"))
    judged = judge_etas([(started - told).total_seconds() for started, told, _ in rows],
                        [(started - at).total_seconds() / (told - at).total_seconds()
                         for started, told, at in rows if told > at])
    return EtaRecord(
        since=since,
        until=until,
        judged=judged.judged,
        on_time=judged.on_time,
        median_share_of_wait=judged.median_share_of_wait,
        median_early_s=judged.median_early_s,
        late_p95_s=judged.late_p95_s,
        late_max_s=judged.late_max_s,
    )


def counts(*, hours: float = 24.0, now: datetime | None = None) -> tuple[int, int]:
    """(jobs judged, of which on time) among those that started in the last ``hours``: one
    aggregate over the started-at index, cheap enough for every /metrics scrape."""
    until = now or timezone.now()
    judged = Job.objects.filter(started_at__gte=until - timedelta(hours=hours), started_at__lt=until,
                                eta_told__isnull=False, eta_told_at__isnull=False)
    got = judged.aggregate(
        judged=Count("pk"),
        on_time=Count("pk", filter=Q(started_at__lte=F("eta_told") + timedelta(seconds=SLACK_S))))
    return got["judged"], got["on_time"]


def likely_start(record: EtaRecord, eta: datetime, now: datetime) -> datetime | None:
    """Where a waiting job's start lands if it has the median share of the wait it is told, as
    the jobs judged lately had: ``None`` unless that share is below one (then the ETA itself
    is the better word)."""
    share = record.median_share_of_wait
    if share is None or share >= 1 or eta <= now:
        return None
    return now + (eta - now) * share


def likely_start_said(eta: datetime | None, *, now: datetime | None = None,
                      record: EtaRecord | None = None) -> dict[str, Any] | None:
    """A waiting job's likely start as the API gives it (`jobs/{id}/explain/`: `likely_start`,
    which `qm explain` prints): when it lands at the median share of its wait that the jobs
    judged over the last week had (`likely_start`), that share, and the counts it rests on.
    ``None`` for no ETA or one already passed (no query then), no job judged, or a share not
    below one. The record is read fresh unless given (one query, as `track_record`)."""
    now = now or timezone.now()
    if eta is None or eta <= now:
        return None
    record = record if record is not None else track_record(now=now)
    at = likely_start(record, eta, now)
    if at is None:
        return None
    return {"at": at, "share_of_wait": record.median_share_of_wait, "judged": record.judged,
            "on_time": record.on_time, "days": record.days}


def started_against_told(job: Job) -> float | None:
    """Seconds the job started after the first ETA it was told (negative: before it), for a job
    that has started after waiting with an ETA; ``None`` otherwise."""
    if job.started_at is None or job.eta_told is None:
        return None
    return (job.started_at - job.eta_told).total_seconds()
