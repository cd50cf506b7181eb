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
because a week of 1-GPU jobs started early; without one it is told why (`no_likely_start`).

A likely start is counted as the record counts: from the first ETA the job was told in this wait
(`FirstEta`), told_at + (first ETA − told_at) × its class's median share. It holds still while
the job waits (it moves only as the record does), so the job can be seen running late against
it, and its page says so once it passes, as it says how far the job is past its first ETA.
Until 6 Dec it was now + (ETA − now) × share: a job whose ETA held was told a later likely start
at every look, never one it could be late against. A job whose ETA has moved back since its
first is told none while it is still ahead (`likely_start_of`): the share of a first wait it is
known to outlast reads too early.

The job page and the API's explain (so `qm explain`) read the last week's record through
`fleet_record`, kept a minute in the shared store, so both tell the same figures within it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, F, Q, Subquery
from django.utils import timezone

from controlplane.choices import NodeState
from controlplane.models import Job, Node
from controlplane.services.percent_text import percent
from controlplane.shared_store import shared_store
from scheduler_core.judging import ETA_SLACK_S as SLACK_S  # the replays' rule: on time within a second
from scheduler_core.judging import LARGE, SIZE_CLASSES, EtaJudgement, judge_etas, size_class

DEFAULT_DAYS = 7
MAX_DAYS = 90

#: A waiting job is told a likely start only when at least this many jobs of its size class were
#: judged in the window: fewer, and the luck of a handful of jobs would read as a likelihood.
MIN_JUDGED_FOR_LIKELY = 20

#: How long `fleet_record` reuses the last week's record (one query over a week of started jobs)
#: before reading it again, and its key in the shared store (v2: with size classes).
FLEET_RECORD_TTL_S = 60
FLEET_RECORD_KEY = f"qm:eta-record:v2:{DEFAULT_DAYS}"


@dataclass(frozen=True)
class SizeClassRecord(EtaJudgement):
    """The record of one size class (``"small"`` or ``"large"``): the figures of
    :class:`EtaRecord` (EtaJudgement's) over the jobs of that class only. ``node_gpus``: the
    GPUs of the fleet's largest node, where the classes split (small: fewer; large: at least
    that many)."""

    size_class: str
    node_gpus: int

    @property
    def gpus_text(self) -> str:
        return gpus_text(self.size_class, self.node_gpus)


def gpus_text(size_class_: str, node_gpus: int) -> str:
    """A size class in GPUs, as the job page and `qm explain` say it: "8+ GPUs", "fewer than 8 GPUs"."""
    return f"{node_gpus}+ GPUs" if size_class_ == LARGE else f"fewer than {node_gpus} GPUs"


@dataclass(frozen=True)
class EtaRecord(EtaJudgement):
    """The ETAs told to the jobs that started in ``[since, until)`` after waiting with one, judged
    (EtaJudgement's figures, ``None`` when no job is judged).

    ``on_time``: the share that started no later than told. ``median_share_of_wait``: the
    median of (actual wait ÷ wait told), both counted from when the ETA was first told: 0.4
    means the median job started after 40 % of the wait it was told. ``median_early_s``: how
    much sooner than told the median on-time job started; ``late_p95_s`` and ``late_max_s``: the
    lateness over all of them (zero for those on time)."""

    since: datetime
    until: datetime
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
        SizeClassRecord(size_class=name, node_gpus=node_gpus, **_figures(_judge(by_class[name])))
        for name in SIZE_CLASSES
    ) if node_gpus is not None else ()
    return EtaRecord(since=since, until=until, size_classes=classes, **_figures(judged))


def _figures(judged: EtaJudgement) -> dict[str, Any]:
    return {f.name: getattr(judged, f.name) for f in fields(EtaJudgement)}


def fleet_record() -> EtaRecord:
    """The fleet's record of the last DEFAULT_DAYS as the job page and `jobs/{id}/explain/` read
    it: from the shared store (Redis; the embedded demo's cache), read afresh at most once every
    FLEET_RECORD_TTL_S by whichever asks first, so the page and `qm explain` tell the same figures
    within that minute, and a waiting job's page refreshing every few seconds costs no query."""
    store = shared_store()
    record: EtaRecord | None = store.get(FLEET_RECORD_KEY)
    if record is None:
        record = track_record()
        store.set(FLEET_RECORD_KEY, record, FLEET_RECORD_TTL_S)
    return record


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


@dataclass(frozen=True)
class FirstEta:
    """The first ETA a waiting job was told in this stay in the queue (``eta``) and when it was
    told (``told_at``): its PendingPlace's `first_eta` and `first_eta_at`, kept as the ETA moves,
    which a bind copies to the job (`eta_told`, `eta_told_at`) for the record to judge. A
    requeue, a hold or a change of what the scheduler reads starts a new stay, told afresh."""

    eta: datetime
    told_at: datetime

    def late_s(self, now: datetime) -> float:
        """How far ``now`` is past this first ETA, in seconds (0 before it)."""
        return max(0.0, (now - self.eta).total_seconds())


def first_eta_of(job: Job, now: datetime) -> FirstEta | None:
    """A waiting job's first ETA of this stay, ``None`` for a job with no ETA now. A job whose
    ETA no cycle has told yet (the cycle tells a first ETA only to a row still as it read it;
    the next cycle tells it otherwise) counts its ETA as told ``now``."""
    eta = job.eta
    if eta is None:
        return None
    first, told_at = job.first_eta, job.first_eta_at
    if first is None or told_at is None:
        return FirstEta(eta=eta, told_at=now)
    return FirstEta(eta=first, told_at=told_at)


def likely_start(record: EtaRecord | SizeClassRecord, first: FirstEta) -> datetime | None:
    """Where a waiting job's start lands if it waits the median share of the wait it was first
    told, as the jobs the record judged did: ``first.told_at`` + (``first.eta`` − ``first.told_at``)
    × share. The record's own measure (its share counts both waits from the first ETA's telling),
    so the time holds still while the job waits, moving only as the record does, and the job
    can be seen running late against it. ``None`` unless that share is below one (then the ETA
    itself is the better word)."""
    share = record.median_share_of_wait
    if share is None or share >= 1:
        return None
    return first.told_at + max(timedelta(0), first.eta - first.told_at) * share


#: How far a waiting job's ETA may move back past the first one it was told before the share of
#: that first wait no longer tells a likely start still ahead (`moved_back`): a minute, so an ETA
#: that a cycle's own timing nudges by seconds keeps its likely start.
MOVED_BACK_SLACK = timedelta(seconds=60)


def moved_back(first: FirstEta, eta: datetime) -> bool:
    """Whether the job's ETA now is later than the first one it was told, by more than
    MOVED_BACK_SLACK: jobs now go ahead of it that did not then (priority, fair share, aging),
    or the GPUs it waits for free later (a reservation moved, a node left)."""
    return eta > first.eta + MOVED_BACK_SLACK


def likely_start_of(record: EtaRecord, gpus: int, first: FirstEta, eta: datetime,
                    now: datetime) -> tuple[SizeClassRecord | None, datetime | None]:
    """A waiting job of ``gpus`` GPUs, first told ``first`` and told ``eta`` now: the record of
    its size class (``None`` when the record has no classes), and where its start lands at that
    class's median share of the wait it was first told (``None`` when fewer than
    MIN_JUDGED_FOR_LIKELY of its class were judged, that share is not below one, its ETA has
    come forward before that time: a likely start is never later than the latest start; or,
    while that time is still ahead of ``now``, its ETA has moved back since it was first told).
    Never another class's share: a gang's wait is not a 1-GPU job's.

    A moved-back ETA: that first wait no longer describes this job's, and the share of it reads
    too early: a job at queue position 24, its ETA in 48 min, was told "likely in 1 min" (its
    first ETA, told 30 min before, had been 62 min away). On replays of the seed's weeks the
    jobs looked at so (ETA moved back 10 min or more, the likely start ahead) started by it
    13-33 % of the time, against 32-39 % over all looks (tests/controlplane/api/
    test_api_likely_start_from_first_eta.py). Once that time has passed it is still said, as a
    fact: the job waits longer than the median job of its class did."""
    own = record.of_size(gpus)
    if own is None or own.judged < MIN_JUDGED_FOR_LIKELY:
        return own, None
    at = likely_start(own, first)
    if at is None or at > eta or (at > now and moved_back(first, eta)):
        return own, None
    return own, at


def likely_start_said(eta: datetime | None, gpus: int, first: FirstEta | None, *, now: datetime | None = None,
                      record: EtaRecord | None = None) -> dict[str, Any] | None:
    """A waiting job's likely start as the API gives it (`jobs/{id}/explain/`: `likely_start`,
    which `qm explain` prints): when it lands at the median share of the wait it was first told
    that the jobs of its size class judged over the last week had (`likely_start_of`), whether
    that time has passed (the job waits longer than the median job of its class did), that share,
    the counts it rests on (of that class), the class and the node size it splits at. ``None``
    for no ETA or one already passed (no read then), fewer than MIN_JUDGED_FOR_LIKELY jobs of
    its class judged, a share not below one, an ETA come forward before it, or one moved back
    since it was first told while it is still ahead (`no_likely_start` says which). The record is `fleet_record`'s unless given."""
    now = now or timezone.now()
    if eta is None or first is None or eta <= now:
        return None
    record = record if record is not None else fleet_record()
    own, at = likely_start_of(record, gpus, first, eta, now)
    if own is None or at is None:
        return None
    return {"at": at, "passed": at <= now, "share_of_wait": own.median_share_of_wait, "judged": own.judged,
            "on_time": own.on_time, "days": record.days, "size_class": own.size_class, "node_gpus": own.node_gpus}


#: Why a waiting job with an ETA ahead is told no likely start (NoLikelyStart.code).
NO_RECORD = "no_record"  # no job waited with an ETA and started in the window
NO_NODE = "no_node"  # jobs were judged, but the fleet has no node to split the sizes at
TOO_FEW_OF_ITS_SIZE = "too_few_of_its_size"  # fewer than MIN_JUDGED_FOR_LIKELY of its size class
NOT_SOONER_THAN_TOLD = "not_sooner_than_told"  # its class's median share of the wait told is not below one
ETA_CAME_FORWARD = "eta_came_forward"  # its ETA now comes before the median share of its first wait
ETA_MOVED_BACK = "eta_moved_back"  # its ETA moved back since first told, that share of the first wait still ahead
NO_LIKELY_START_CODES = (NO_RECORD, NO_NODE, TOO_FEW_OF_ITS_SIZE, NOT_SOONER_THAN_TOLD, ETA_CAME_FORWARD,
                         ETA_MOVED_BACK)


@dataclass(frozen=True)
class NoLikelyStart:
    """Why a waiting job with an ETA ahead is told no likely start: ``code`` (one of
    NO_LIKELY_START_CODES), the figures it rests on (its size class and where the classes split,
    unknown without a record or a node; how many of its class were judged and how many it takes;
    its class's median share when enough were judged) and ``reason``, the words the job page
    says after "No likely start: " and `qm explain` after "none: " (one home for them)."""

    code: str
    size_class: str | None
    node_gpus: int | None
    judged: int
    needed: int
    share_of_wait: float | None
    days: int

    @property
    def reason(self) -> str:
        if self.code == NO_RECORD:
            return f"no job waited with an ETA and started in the last {self.days} days"
        if self.code == NO_NODE:
            return "the fleet has no node to tell a job's size by"
        assert self.size_class is not None and self.node_gpus is not None
        gpus = gpus_text(self.size_class, self.node_gpus)
        if self.code == TOO_FEW_OF_ITS_SIZE:
            few = f"only {self.judged}" if self.judged else "none"
            return (f"{few} of them asked {gpus}, as this one does, and it takes {self.needed} to tell one "
                    "(jobs of another size wait differently)")
        if self.share_of_wait is None:
            return f"no job of {gpus} judged had a wait told to measure a share of"
        if self.code == ETA_MOVED_BACK:
            return ("its ETA has moved back since it was first told (jobs now go ahead of it that did not then, or "
                    f"the GPUs it waits for free later), so {percent(self.share_of_wait)} of that first wait, where "
                    f"the median job of {gpus} started, would read too early: its ETA is the better word")
        if self.code == ETA_CAME_FORWARD:
            return (f"its ETA has come forward since it was first told, before {percent(self.share_of_wait)} of that "
                    f"first wait, where the median job of {gpus} started: its ETA is the better word")
        return (f"the median job of {gpus} started after {percent(self.share_of_wait)} of the wait it was told, no "
                "sooner than told: its ETA is the better word")


def no_likely_start(record: EtaRecord, gpus: int, eta: datetime | None, first: FirstEta | None,
                    now: datetime) -> NoLikelyStart | None:
    """Why a waiting job of ``gpus`` GPUs with an ETA ahead has no likely start by ``record``
    (the rule of `likely_start_of`); ``None`` when it has one, or has no ETA ahead (nothing
    to be likelier than)."""
    if eta is None or first is None or eta <= now:
        return None
    own, at = likely_start_of(record, gpus, first, eta, now)
    if at is not None:
        return None
    if own is None:
        return NoLikelyStart(code=NO_NODE if record.judged else NO_RECORD, size_class=None, node_gpus=None,
                             judged=0, needed=MIN_JUDGED_FOR_LIKELY, share_of_wait=None, days=record.days)
    share = own.median_share_of_wait
    if own.judged < MIN_JUDGED_FOR_LIKELY:
        code = TOO_FEW_OF_ITS_SIZE
    elif share is not None and share < 1:
        code = ETA_MOVED_BACK if moved_back(first, eta) else ETA_CAME_FORWARD
    else:
        code = NOT_SOONER_THAN_TOLD
    return NoLikelyStart(code=code, size_class=own.size_class, node_gpus=own.node_gpus, judged=own.judged,
                         needed=MIN_JUDGED_FOR_LIKELY, share_of_wait=share if code != TOO_FEW_OF_ITS_SIZE else None,
                         days=record.days)


def eta_lately(gpus: int, eta: datetime, first: FirstEta | None, now: datetime) -> tuple[
        EtaRecord, SizeClassRecord | None, datetime | None, NoLikelyStart | None]:
    """Beside a waiting job's ETA, as its page says it and `qm explain` prints it: the fleet's
    record (`fleet_record`), the record of the job's size class (``None`` without classes), where
    its start likely lands, counted from its first ETA ``first`` (``None`` when there is none),
    and why there is none (``None`` when there is one, or its ETA passed)."""
    record = fleet_record()
    own, likely = likely_start_of(record, gpus, first, eta, now) if first is not None else (record.of_size(gpus), None)
    return record, own, likely, no_likely_start(record, gpus, eta, first, now)


def explained(job: Job | None, *, now: datetime | None = None) -> dict[str, Any]:
    """A waiting job's ETA record as `jobs/{id}/explain/` gives it (`qm explain` prints it):
    ``first_eta``, the first ETA it was told in this stay in the queue, when, and how far it is
    past it; ``eta_record``, the fleet's figures and its size class's (``own_class``, null without
    classes) as its page says them beside its ETA; ``likely_start`` (`likely_start_said`) and
    ``likely_start_missing``, why there is none (`no_likely_start`, its ``reason`` in the page's
    words). All null for no job (not waiting) or a job with no ETA (no read then); the record is
    `fleet_record`'s, the page's of the same minute."""
    eta = job.eta if job is not None else None
    if job is None or eta is None:
        return {"first_eta": None, "eta_record": None, "likely_start": None, "likely_start_missing": None}
    now = now or timezone.now()
    first = first_eta_of(job, now)
    record, own, _, missing = eta_lately(job.gpus, eta, first, now)
    return {
        "first_eta": None if first is None else {
            "at": first.eta, "told_at": first.told_at, "late_s": round(first.late_s(now), 3)},
        "eta_record": {
            "days": record.days, "judged": record.judged, "on_time": record.on_time,
            "median_share_of_wait": record.median_share_of_wait,
            "own_class": None if own is None else {
                "size_class": own.size_class, "node_gpus": own.node_gpus, "judged": own.judged,
                "on_time": own.on_time, "median_share_of_wait": own.median_share_of_wait},
        },
        "likely_start": likely_start_said(eta, job.gpus, first, now=now, record=record),
        "likely_start_missing": None if missing is None else {
            "code": missing.code, "reason": missing.reason, "size_class": missing.size_class,
            "node_gpus": missing.node_gpus, "judged": missing.judged, "needed": missing.needed,
            "share_of_wait": missing.share_of_wait, "days": missing.days},
    }


def started_against_told(job: Job) -> float | None:
    """Seconds the job started after the first ETA it was told (negative: before it), for a job
    that has started after waiting with an ETA; ``None`` otherwise."""
    if job.started_at is None or job.eta_told is None:
        return None
    return (job.started_at - job.eta_told).total_seconds()
