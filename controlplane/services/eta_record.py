"""How far the ETAs the scheduler tells waiting jobs have held: its track record.

Each job keeps the first ETA it was told in the wait that ended in its latest start
(`Job.eta_told`, copied from its PendingPlace at the bind) and when it was told
(`Job.eta_told_at`). The engine computes an ETA from running jobs' runtime limits and the queue
as it stands, so it is close to an upper bound: jobs usually start sooner, and later only when
the fleet or the queue ahead changed after it was told (jobs submitted later went first by
priority, fair share or aging; a reservation moved; a node left). The record says how often and by how much, so a researcher reading "ETA in 6 h" knows what that has
meant on this fleet. The simulator measures the same on replays, by the same rule
(scheduler_core/judging.py: judge_etas).

The record is also judged per size class, split as the simulator splits its waits
(scheduler_core/judging.py: size_class): "small", fewer GPUs than the fleet's largest node holds,
and "large", at least that many (a whole node or a gang of them, wherever it runs). The two wait
differently: small jobs backfill into the gaps and start far sooner than told, a gang waits for
whole nodes to drain. A waiting job's likely start rests on its own class's record only, and only
once that class has MIN_JUDGED_FOR_LIKELY judged jobs: a 32-GPU gang is not told "likely in 1 min"
because a week of 1-GPU jobs started early."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, F, Q, Subquery
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Job, Node
from scheduler_core.judging import ETA_SLACK_S as SLACK_S  # the replays' rule: on time within a second
from scheduler_core.judging import LARGE, SIZE_CLASSES, EtaJudgement, judge_etas, size_class

DEFAULT_DAYS = 7
MAX_DAYS = 90

#: A waiting job is told a likely start only when at least this many jobs of its size class were
#: judged in the window: fewer, and the luck of a handful of jobs would read as a likelihood.
MIN_JUDGED_FOR_LIKELY = 20


@dataclass(frozen=True)
class SizeClassRecord:
    """The record of one size class (``"small"`` or ``"large"``): the same figures as
    :class:`EtaRecord`'s over the jobs of that class only. ``node_gpus``: the GPUs of the
    fleet's largest node, where the classes split (small: fewer; large: at least that many)."""

    size_class: str
    node_gpus: int
    judged: int
    on_time: float | None
    median_share_of_wait: float | None
    median_early_s: float | None
    late_p95_s: float | None
    late_max_s: float | None

    @property
    def gpus_text(self) -> str:
        """The class in GPUs, as the job page and `qm explain` say it: "8+ GPUs", "fewer than 8 GPUs"."""
        return f"{self.node_gpus}+ GPUs" if self.size_class == LARGE else f"fewer than {self.node_gpus} GPUs"


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
    #: the same record per size class, small then large; empty when no job is judged or the
    #: fleet has no node (its node size unknown)
    size_classes: tuple[SizeClassRecord, ...] = ()

    @property
    def days(self) -> int:
        return round((self.until - self.since).total_seconds() / 86400)

    def of_size(self, gpus: int) -> SizeClassRecord | None:
        """The record of the size class a job of ``gpus`` GPUs is in; ``None`` with no classes."""
        for row in self.size_classes:
            if row.size_class == size_class(gpus, row.node_gpus):
                return row
        return None


def _judge(rows: list[tuple[datetime, datetime, datetime]]) -> EtaJudgement:
    return judge_etas([(started - told).total_seconds() for started, told, _ in rows],
                      [(started - at).total_seconds() / (told - at).total_seconds()
                       for started, told, at in rows if told > at])


def track_record(*, days: int = DEFAULT_DAYS, now: datetime | None = None) -> EtaRecord:
    """The fleet's record over the last ``days``, whole and per size class (one query: the
    largest node's GPUs ride along as a subquery)."""
    until = now or timezone.now()
    since = until - timedelta(days=days)
    largest = Node.objects.exclude(state=NodeState.RETIRED).order_by("-gpu_count").values("gpu_count")[:1]
    rows = list(Job.objects.filter(started_at__gte=since, started_at__lt=until, eta_told__isnull=False,
                                   eta_told_at__isnull=False)
                .annotate(node_gpus=Subquery(largest))
                .values_list("started_at", "eta_told", "eta_told_at", "gpus", "node_gpus"))
    judged = _judge([(started, told, at) for started, told, at, _, _ in rows])
    node_gpus = rows[0][4] if rows else None
    by_class: dict[str, list[tuple[datetime, datetime, datetime]]] = {name: [] for name in SIZE_CLASSES}
    if node_gpus is not None:
        for started, told, at, gpus, _ in rows:
            by_class[size_class(gpus, node_gpus)].append((started, told, at))
    classes = tuple(
        SizeClassRecord(size_class=name, node_gpus=node_gpus, judged=j.judged, on_time=j.on_time,
                        median_share_of_wait=j.median_share_of_wait, median_early_s=j.median_early_s,
                        late_p95_s=j.late_p95_s, late_max_s=j.late_max_s)
        for name, j in ((name, _judge(by_class[name])) for name in SIZE_CLASSES)
    ) if node_gpus is not None else ()
    return EtaRecord(
        since=since,
        until=until,
        judged=judged.judged,
        on_time=judged.on_time,
        median_share_of_wait=judged.median_share_of_wait,
        median_early_s=judged.median_early_s,
        late_p95_s=judged.late_p95_s,
        late_max_s=judged.late_max_s,
        size_classes=classes,
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


def likely_start(record: EtaRecord | SizeClassRecord, eta: datetime, now: datetime) -> datetime | None:
    """Where a waiting job's start lands if it has the median share of the wait it is told, as
    the jobs judged lately had: ``None`` unless that share is below one (then the ETA itself
    is the better word)."""
    share = record.median_share_of_wait
    if share is None or share >= 1 or eta <= now:
        return None
    return now + (eta - now) * share


def likely_start_of(record: EtaRecord, gpus: int, eta: datetime,
                    now: datetime) -> tuple[SizeClassRecord | None, datetime | None]:
    """A waiting job of ``gpus`` GPUs: the record of its size class (``None`` when the record
    has no classes), and where its start lands at that class's median share of the wait told
    (``None`` when fewer than MIN_JUDGED_FOR_LIKELY of its class were judged, or that share is
    not below one). Never another class's share: a gang's wait is not a 1-GPU job's."""
    own = record.of_size(gpus)
    if own is None or own.judged < MIN_JUDGED_FOR_LIKELY:
        return own, None
    return own, likely_start(own, eta, now)


def likely_start_said(eta: datetime | None, gpus: int, *, now: datetime | None = None,
                      record: EtaRecord | None = None) -> dict[str, Any] | None:
    """A waiting job's likely start as the API gives it (`jobs/{id}/explain/`: `likely_start`,
    which `qm explain` prints): when it lands at the median share of its wait that the jobs of
    its size class judged over the last week had (`likely_start_of`), that share, the counts it
    rests on (of that class), the class and the node size it splits at. ``None`` for no ETA or
    one already passed (no query then), fewer than MIN_JUDGED_FOR_LIKELY jobs of its class
    judged, or a share not below one. The record is read fresh unless given (one query, as
    `track_record`)."""
    now = now or timezone.now()
    if eta is None or eta <= now:
        return None
    record = record if record is not None else track_record(now=now)
    own, at = likely_start_of(record, gpus, eta, now)
    if own is None or at is None:
        return None
    return {"at": at, "share_of_wait": own.median_share_of_wait, "judged": own.judged, "on_time": own.on_time,
            "days": record.days, "size_class": own.size_class, "node_gpus": own.node_gpus}


def started_against_told(job: Job) -> float | None:
    """Seconds the job started after the first ETA it was told (negative: before it), for a job
    that has started after waiting with an ETA; ``None`` otherwise."""
    if job.started_at is None or job.eta_told is None:
        return None
    return (job.started_at - job.eta_told).total_seconds()
