"""The arithmetic of accounting, pure: no database, no clock. services/accounting.py feeds it rows
and stores what it returns; tests feed it hand-built cases.

The three tiers, per job and minute (docs/accounting.md has the full text):
  allocated  = GPUs held by the job's live allocation × seconds held;
  active     = Σ over agent samples of GPUs × seconds × reported device activity (≤ allocated);
  productive = min(active, retained progress ÷ the job's fault-free rate), where the fault-free
               rate is progress per active GPU-second over the job's best steady window.
Cost is GPU-seconds × the $/GPU-hour of the node's GPU type and capacity tier in force at each
instant; a price change inside a minute splits the minute.

Times are handled as integer microseconds since the epoch, GPU-seconds and money as Decimal,
so allocated GPU-seconds and costs are exact and sums reconcile to the cent.
"""

from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_DOWN, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal

US = 1_000_000
MINUTE_US = 60 * US
GPU_SECONDS_QUANTUM = Decimal("0.000001")
USD_QUANTUM = Decimal("0.000000000000001")
#: µs in an hour: GPU-µs × $/GPU-hour ÷ this is $.
US_PER_HOUR = Decimal(3600 * US)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

#: A job's fault-free rate is measured over this many consecutive steady minutes.
STEADY_MINUTES = 5


# ---------------------------------------------------------------------------------- time


def to_us(moment: datetime) -> int:
    """Microseconds since the epoch, exactly (no float on the way)."""
    delta = moment - _EPOCH
    return (delta.days * 86400 + delta.seconds) * US + delta.microseconds


def from_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def floor_to(moment: datetime, bucket_s: int) -> datetime:
    """The start of the UTC minute, hour or day (`bucket_s` 60, 3600, 86400) holding `moment`."""
    step = bucket_s * US
    return from_us(to_us(moment) // step * step)


def ceil_to(moment: datetime, bucket_s: int) -> datetime:
    step = bucket_s * US
    return from_us(-(-to_us(moment) // step) * step)


def overlap_us(a0: int, a1: int, b0: int, b1: int) -> int:
    return max(0, min(a1, b1) - max(a0, b0))


def gpu_seconds(gpu_us: int) -> Decimal:
    """GPU-microseconds as exact GPU-seconds."""
    return Decimal(gpu_us).scaleb(-6)


def quantize_down(value: Decimal | float, quantum: Decimal = GPU_SECONDS_QUANTUM) -> Decimal:
    """Round towards zero, so a derived tier never rounds above the tier it is bounded by."""
    return Decimal(value).quantize(quantum, rounding=ROUND_DOWN)


# --------------------------------------------------------------------------------- prices


@dataclass
class PriceBook:
    """$/GPU-hour per (GPU type, capacity tier), each rate in force from its start until the next.

    Before a type/tier's first rate there is no price: that time costs nothing and is counted in
    `unpriced_gpu_us` so callers can say so instead of hiding it.
    """

    _starts: dict[tuple[int, str], list[int]] = field(default_factory=dict)
    _rates: dict[tuple[int, str], list[Decimal]] = field(default_factory=dict)
    unpriced_gpu_us: int = 0

    @classmethod
    def from_rows(cls, rows: Iterable[tuple[int, str, datetime, Decimal]]) -> PriceBook:
        book = cls()
        staged: dict[tuple[int, str], list[tuple[int, Decimal]]] = defaultdict(list)
        for gpu_type_id, tier, effective_from, rate in rows:
            staged[(gpu_type_id, str(tier))].append((to_us(effective_from), Decimal(rate)))
        for key, entries in staged.items():
            entries.sort()
            book._starts[key] = [s for s, _ in entries]
            book._rates[key] = [r for _, r in entries]
        return book

    def keys(self) -> list[tuple[int, str]]:
        """The (GPU type, capacity tier) pairs that have a rate."""
        return list(self._starts)

    def starts(self, key: tuple[int, str]) -> list[int]:
        """When each rate of (GPU type, capacity tier) comes into force, in µs, in order."""
        return list(self._starts.get(key, []))

    def rate_at(self, gpu_type_id: int, tier: str, at_us: int) -> Decimal | None:
        starts = self._starts.get((gpu_type_id, tier))
        if not starts:
            return None
        i = bisect.bisect_right(starts, at_us) - 1
        return self._rates[(gpu_type_id, tier)][i] if i >= 0 else None

    def segments(self, gpu_type_id: int, tier: str, start_us: int, end_us: int) -> list[tuple[int, int, Decimal | None]]:
        """[start, end) cut where the price changes, each piece with its rate (None: unpriced)."""
        if end_us <= start_us:
            return []
        starts = self._starts.get((gpu_type_id, tier), [])
        cuts = [s for s in starts if start_us < s < end_us]
        bounds = [start_us, *cuts, end_us]
        return [(a, b, self.rate_at(gpu_type_id, tier, a)) for a, b in zip(bounds, bounds[1:], strict=False)]

    def cost(self, gpu_type_id: int, tier: str, start_us: int, end_us: int, gpus: int | Decimal) -> Decimal:
        """Exact $ for `gpus` GPUs over [start, end): Σ GPUs × µs × rate ÷ 3.6e9 µs/h."""
        return self.gpu_us_cost(gpu_type_id, tier, start_us, end_us, gpus) / US_PER_HOUR

    def gpu_us_cost(self, gpu_type_id: int, tier: str, start_us: int, end_us: int, gpus: int | Decimal) -> Decimal:
        """`cost` before its division: Σ GPUs × µs × $/GPU-hour over [start, end), exact (whole
        GPUs and µs times a rate of 4 decimals: far fewer digits than a Decimal keeps), so sums of
        it are exact too and a sum divided once by US_PER_HOUR rounds to the cent as the exact
        figure does (accounting's runs and jobs costs)."""
        total = Decimal(0)
        for a, b, rate in self.segments(gpu_type_id, tier, start_us, end_us):
            if rate is None:
                self.unpriced_gpu_us += int(gpus * (b - a))
                continue
            total += Decimal(gpus) * (b - a) * rate
        return total

    def reserved_rate_key(self, gpu_type_id: int, at_us: int) -> str | None:
        """The tier whose rate prices an idle guarantee: reserved, else on-demand, else spot."""
        for tier in ("reserved", "on_demand", "spot"):
            if self.rate_at(gpu_type_id, tier, at_us) is not None:
                return tier
        return None


# ------------------------------------------------------------------------------ the inputs


@dataclass(frozen=True)
class Span:
    """One allocation's GPUs on one node, held over [start, end). `end` None: still held."""

    allocation_id: int
    job_id: int
    node_id: int
    gpus: int
    start_us: int
    end_us: int | None
    borrowed: bool
    gpu_type_id: int
    capacity_tier: str

    def held_cost(self, prices: PriceBook, start_us: int, end_us: int) -> Decimal:
        """Exact $ for holding these GPUs over [start, end): the node's GPU type and capacity
        tier at the rate in force at each instant, cut where a rate changes. The rollup prices
        every allocated minute (and a loss window's piece of one) so; a job's runs list prices
        each run's whole span so (job_costs.run_costs), and the two add up alike."""
        return prices.cost(self.gpu_type_id, self.capacity_tier, start_us, end_us, self.gpus)

    def held_gpu_us_cost(self, prices: PriceBook, start_us: int, end_us: int) -> Decimal:
        """`held_cost` before its division by US_PER_HOUR (`PriceBook.gpu_us_cost`): exact."""
        return prices.gpu_us_cost(self.gpu_type_id, self.capacity_tier, start_us, end_us, self.gpus)


@dataclass(frozen=True)
class Sample:
    """An agent's report for one allocation on one node over [start, end)."""

    allocation_id: int
    node_id: int
    start_us: int
    end_us: int
    gpus: int
    activity: float
    steps: int
    useful_tokens: int


EVICTED = "evicted"  # preemption, resize, fence: the control plane threw the work away
FAILED = "failed"  # the job failed or hit its runtime limit: its own loss


@dataclass(frozen=True)
class LossWindow:
    """Work of an allocation over [start, end) that was never kept (replayed since the last
    checkpoint). `kind` EVICTED counts as preemption waste; FAILED only leaves the productive
    tier."""

    allocation_id: int
    start_us: int
    end_us: int
    kind: str
    #: Nodes whose gang member ended on its own before the eviction: they held nothing when it
    #: came, so none of their work is in this loss (the record counts the GPUs still held).
    spared_nodes: frozenset[int] = frozenset()


CellKey = tuple[int, int, int, str, bool]  # (minute start µs, job, GPU type, capacity tier, borrowed)


@dataclass
class Cell:
    """One job's minute on one kind of capacity, as accumulated from spans and samples."""

    allocated_gpu_us: int = 0
    reported_gpu_us: int = 0
    active_gpu_us: float = 0.0
    lost_gpu_us: int = 0
    steps: float = 0.0
    useful_tokens: float = 0.0
    retained_steps: float = 0.0
    retained_tokens: float = 0.0
    cost_usd: Decimal = Decimal(0)
    lost_cost_usd: Decimal = Decimal(0)

    @property
    def allocated(self) -> Decimal:
        return gpu_seconds(self.allocated_gpu_us)

    @property
    def reported(self) -> Decimal:
        return gpu_seconds(min(self.reported_gpu_us, self.allocated_gpu_us))

    @property
    def active(self) -> Decimal:
        """Never above allocated: overlapping or oversized reports cannot invent held time."""
        return min(self.allocated, quantize_down(self.active_gpu_us / US))

    @property
    def lost(self) -> Decimal:
        return gpu_seconds(min(self.lost_gpu_us, self.allocated_gpu_us))

    def retained_progress(self, unit: str) -> float:
        return self.retained_steps if unit == "steps" else self.retained_tokens

    def progress(self, unit: str) -> float:
        return self.steps if unit == "steps" else self.useful_tokens


@dataclass
class JobMinute:
    """A job's minute as a whole (all its cells), for measuring its fault-free rate."""

    steady: bool
    active_gpu_seconds: float
    steps: float
    useful_tokens: float


@dataclass
class Derivation:
    cells: dict[CellKey, Cell]
    job_minutes: dict[int, dict[int, JobMinute]]  # job → minute start µs → minute


def _overlap_with_windows(a0: int, a1: int, windows: Sequence[LossWindow]) -> int:
    """µs of [a0, a1) inside the union of `windows` (they may overlap each other)."""
    pieces = sorted((max(a0, w.start_us), min(a1, w.end_us)) for w in windows if w.end_us > a0 and w.start_us < a1)
    covered, reach = 0, a0
    for s, e in pieces:
        s = max(s, reach)
        if e > s:
            covered += e - s
            reach = e
    return covered


def _spread_progress(cells: dict[CellKey, Cell]) -> None:
    """A job's progress in a minute, spread over its cells of that minute in proportion to
    their active GPU-µs (their allocated GPU-µs where none was active).

    A gang's progress is reported once, by the node hosting rank 0, so it lands in that node's
    cell; a gang on two kinds of capacity (reserved and on-demand nodes, two GPU types, own and
    borrowed quota) has a cell per kind, and productive = min(active, retained ÷ rate) is taken
    per cell: the cells without rank 0 had no productive time at all and rank 0's was capped at
    its own active time. On the demo (5 Dec) a 64-GPU gang across reserved and on-demand H100
    nodes read 1.89 productive GPU-hours of 2.52 active although it lost nothing but 18
    GPU-seconds to a requeue. Spread, the cells' productive times add up to the job's
    min(active, retained ÷ rate), and each cell's is its share of it. The job's minute totals
    (steps, tokens, retained) are unchanged."""
    by_job_minute: dict[tuple[int, int], list[Cell]] = defaultdict(list)
    for (minute, job_id, *_), cell in cells.items():
        by_job_minute[(minute, job_id)].append(cell)
    for group in by_job_minute.values():
        if len(group) < 2:
            continue
        weights = [cell.active_gpu_us for cell in group]
        if sum(weights) <= 0:
            weights = [float(cell.allocated_gpu_us) for cell in group]
        whole = sum(weights)
        if whole <= 0:
            continue
        totals = [sum(getattr(cell, name) for cell in group)
                  for name in ("steps", "useful_tokens", "retained_steps", "retained_tokens")]
        for cell, weight in zip(group, weights, strict=True):
            share = weight / whole
            cell.steps, cell.useful_tokens, cell.retained_steps, cell.retained_tokens = (t * share for t in totals)


def derive_minutes(
    start_us: int,
    end_us: int,
    spans: Sequence[Span],
    samples: Sequence[Sample],
    losses: Sequence[LossWindow],
    prices: PriceBook,
) -> Derivation:
    """Cells for every minute in [start, end) (the last may be partial), from held spans, agent
    samples and loss windows.

    Steps, per span and minute:
      1. held = the span clipped to the minute (and to `end`): allocated GPU-µs and its cost,
         cut at price changes;
      2. the held time inside an eviction's loss window is lost GPU-µs, priced the same way;
      3. each sample of that allocation on that node adds activity × GPUs × overlap to active,
         GPUs × overlap to reported, and its steps and tokens pro rata to the overlap; the part
         of the overlap inside any loss window is not retained.
    A job's minute is steady when every span of the job held the whole minute and samples
    covered all of it.
    """
    cells: dict[CellKey, Cell] = {}
    job_minutes: dict[int, dict[int, JobMinute]] = defaultdict(dict)
    samples_by_span: dict[tuple[int, int], list[Sample]] = defaultdict(list)
    for sample in samples:
        if sample.end_us > sample.start_us:
            samples_by_span[(sample.allocation_id, sample.node_id)].append(sample)
    # Per span: samples sorted by start, so each minute visits only the samples that reach it.
    index: dict[tuple[int, int], tuple[list[int], int]] = {}
    for key, group in samples_by_span.items():
        group.sort(key=lambda s: s.start_us)
        index[key] = ([s.start_us for s in group], max(s.end_us - s.start_us for s in group))
    losses_by_allocation: dict[int, list[LossWindow]] = defaultdict(list)
    for loss in losses:
        if loss.end_us > loss.start_us:
            losses_by_allocation[loss.allocation_id].append(loss)
    whole: dict[tuple[int, int], bool] = {}
    # What each allocation held on each node from first to last: a hold cut where the job's
    # borrowed flag changed (accounting.held_spans) is one hold, whole across the cut.
    held_from_to: dict[tuple[int, int], tuple[int, int | None]] = {}
    for span in spans:
        key = (span.allocation_id, span.node_id)
        seen = held_from_to.get(key)
        if seen is None:
            held_from_to[key] = (span.start_us, span.end_us)
        else:
            held_from_to[key] = (min(seen[0], span.start_us),
                                 None if seen[1] is None or span.end_us is None else max(seen[1], span.end_us))
    first_minute = start_us // MINUTE_US * MINUTE_US
    for span in spans:
        span_end = end_us if span.end_us is None else min(span.end_us, end_us)
        span_start = max(span.start_us, start_us)
        if span_end <= span_start:
            continue
        windows = [w for w in losses_by_allocation.get(span.allocation_id, []) if span.node_id not in w.spared_nodes]
        evictions = [w for w in windows if w.kind == EVICTED]
        span_samples = samples_by_span.get((span.allocation_id, span.node_id), [])
        starts, longest = index.get((span.allocation_id, span.node_id), ([], 0))
        minute = max(first_minute, span_start // MINUTE_US * MINUTE_US)
        while minute < span_end:
            m1 = minute + MINUTE_US
            h0, h1 = max(span_start, minute), min(span_end, m1)
            if h1 > h0:
                key = (minute, span.job_id, span.gpu_type_id, span.capacity_tier, span.borrowed)
                cell = cells.setdefault(key, Cell())
                # 1. held
                cell.allocated_gpu_us += span.gpus * (h1 - h0)
                cell.cost_usd += span.held_cost(prices, h0, h1)
                # 2. evicted work
                for w in evictions:
                    l0, l1 = max(h0, w.start_us), min(h1, w.end_us)
                    if l1 > l0:
                        cell.lost_gpu_us += span.gpus * (l1 - l0)
                        cell.lost_cost_usd += span.held_cost(prices, l0, l1)
                # 3. what the agent saw
                first = bisect.bisect_left(starts, h0 - longest)
                last = bisect.bisect_left(starts, h1)
                for s in span_samples[first:last]:
                    o0, o1 = max(h0, s.start_us), min(h1, s.end_us)
                    if o1 <= o0:
                        continue
                    gpus = min(s.gpus, span.gpus)
                    seen = o1 - o0
                    share = seen / (s.end_us - s.start_us)
                    kept = 1.0 - _overlap_with_windows(o0, o1, windows) / seen
                    cell.active_gpu_us += gpus * seen * s.activity
                    cell.reported_gpu_us += gpus * seen
                    cell.steps += s.steps * share
                    cell.useful_tokens += s.useful_tokens * share
                    cell.retained_steps += s.steps * share * kept
                    cell.retained_tokens += s.useful_tokens * share * kept
            held_from, held_to = held_from_to[(span.allocation_id, span.node_id)]
            covers = held_from <= minute and (held_to is None or held_to >= m1) and m1 <= end_us
            previous = whole.get((span.job_id, minute), True)
            whole[(span.job_id, minute)] = previous and covers
            minute = m1
    _spread_progress(cells)
    for (minute, job_id, *_), cell in cells.items():
        jm = job_minutes[job_id].get(minute)
        if jm is None:
            jm = job_minutes[job_id][minute] = JobMinute(steady=True, active_gpu_seconds=0.0, steps=0.0, useful_tokens=0.0)
        jm.steady = jm.steady and whole.get((job_id, minute), False) and cell.reported_gpu_us >= cell.allocated_gpu_us
        jm.active_gpu_seconds += float(cell.active)
        jm.steps += cell.steps
        jm.useful_tokens += cell.useful_tokens
    for minutes in job_minutes.values():
        for jm in minutes.values():
            jm.steady = jm.steady and jm.active_gpu_seconds > 0
    return Derivation(cells=cells, job_minutes=dict(job_minutes))


# ----------------------------------------------------------------------- the fault-free rate


@dataclass(frozen=True)
class RateWindow:
    per_active_gpu_second: float
    start_us: int
    end_us: int


def progress_unit(steps: float, useful_tokens: float, current: str | None) -> str | None:
    """Steps once a job has reported any; useful tokens for jobs that report only tokens."""
    if current == "steps" or steps > 0:
        return "steps"
    if useful_tokens > 0:
        return "useful_tokens"
    return current


def best_steady_window(minutes: Mapping[int, JobMinute], unit: str, length: int = STEADY_MINUTES) -> RateWindow | None:
    """The highest progress per active GPU-second over `length` consecutive steady minutes."""
    best: RateWindow | None = None
    ordered = sorted(minutes.items())
    run: list[tuple[int, JobMinute]] = []
    for minute, jm in ordered:
        if not jm.steady or (run and minute != run[-1][0] + MINUTE_US):
            run = []
        if not jm.steady:
            continue
        run.append((minute, jm))
        if len(run) >= length:
            window = run[-length:]
            active = sum(m.active_gpu_seconds for _, m in window)
            progress = sum(m.steps if unit == "steps" else m.useful_tokens for _, m in window)
            if active > 0 and progress > 0:
                rate = progress / active
                if best is None or rate > best.per_active_gpu_second:
                    best = RateWindow(rate, window[0][0], window[-1][0] + MINUTE_US)
    return best


def productive_of(active: Decimal, retained_progress: float, rate: float | None) -> Decimal:
    """min(active, retained progress ÷ fault-free rate), rounded down to the µs."""
    if rate is None or rate <= 0 or retained_progress <= 0:
        return Decimal(0)
    return min(active, quantize_down(retained_progress / rate))


# ---------------------------------------------------------------------- idle guarantees


@dataclass(frozen=True)
class Guarantee:
    team_id: int
    gpu_type_id: int
    nominal_gpus: int
    lending_limit: int | None
    cohort_id: int | None


@dataclass(frozen=True)
class Holding:
    """GPUs of one type a team held over [start, end)."""

    team_id: int
    gpu_type_id: int
    gpus: int
    start_us: int
    end_us: int


@dataclass
class QuotaCell:
    nominal_gpu_us: int = 0
    used_gpu_us: int = 0
    borrowed_gpu_us: int = 0
    lent_gpu_us: float = 0.0
    idle_cost_usd: Decimal = Decimal(0)

    def parts(self) -> tuple[Decimal, Decimal, Decimal, Decimal, Decimal]:
        """(nominal, used, borrowed, lent, idle) GPU-seconds with used + lent + idle = nominal."""
        nominal = gpu_seconds(self.nominal_gpu_us)
        used = gpu_seconds(self.used_gpu_us)
        lent = min(nominal - used, quantize_down(self.lent_gpu_us / US))
        return nominal, used, gpu_seconds(self.borrowed_gpu_us), lent, nominal - used - lent


def idle_guarantees(
    start_us: int,
    end_us: int,
    guarantees: Sequence[Guarantee],
    holdings: Sequence[Holding],
    prices: PriceBook,
) -> dict[tuple[int, int], QuotaCell]:
    """Per (team, GPU type) over [start, end): guarantee used, lent and left idle.

    At every instant, per GPU type:
      1. each team's use u splits into within-guarantee min(u, n) and borrowed max(0, u − n);
      2. all of a cohort's borrowing runs on its teams' unused guarantees, as the engine charges
         it: scheduler_core's QuotaLedger admits a team's GPUs above nominal only against what the
         cohort's other teams lend, whatever the fleet holds beyond the guarantees, and lets a
         lender reclaim them once it needs them. The live "lent" (quotas.lent_now, the teams
         page) and the rollup's (accounting._store_idle_guarantees) both count it so; until
         7 Dec borrowers ran first on the fleet's GPUs beyond the guarantees, lent by nobody;
      3. inside each cohort, that borrowing is attributed to the teams with unused guarantee in
         proportion to what each could lend (its unused guarantee, capped by its lending limit);
         borrowing beyond what they could all lend (a lending limit lowered under running
         borrowers) is lent beyond the limits, in proportion to the unused guarantee above them;
      4. idle = guarantee − used − lent, priced at the GPU type's reserved-capacity rate.
    The instants where anything changes (holdings starting or ending) cut [start, end) into
    pieces with constant figures, so the result is exact, not sampled.
    """
    out: dict[tuple[int, int], QuotaCell] = {}
    if end_us <= start_us:
        return out
    by_type: dict[int, list[Guarantee]] = defaultdict(list)
    for g in guarantees:
        by_type[g.gpu_type_id].append(g)
        out[(g.team_id, g.gpu_type_id)] = QuotaCell()
    cuts = {start_us, end_us}
    for h in holdings:
        for t in (h.start_us, h.end_us):
            if start_us < t < end_us:
                cuts.add(t)
    bounds = sorted(cuts)
    for a, b in zip(bounds, bounds[1:], strict=False):
        held: dict[tuple[int, int], int] = defaultdict(int)
        for h in holdings:
            if h.start_us <= a and h.end_us >= b:
                held[(h.team_id, h.gpu_type_id)] += h.gpus
        for gpu_type_id, type_guarantees in by_type.items():
            _attribute_piece(a, b, gpu_type_id, type_guarantees, held, prices, out)
    return out


def _attribute_piece(
    a: int,
    b: int,
    gpu_type_id: int,
    guarantees: Sequence[Guarantee],
    held: Mapping[tuple[int, int], int],
    prices: PriceBook,
    out: dict[tuple[int, int], QuotaCell],
) -> None:
    dt = b - a
    unused: dict[int, int] = {}
    over_by_cohort: dict[int | None, int] = defaultdict(int)
    for g in guarantees:
        u = held.get((g.team_id, gpu_type_id), 0)
        within = min(u, g.nominal_gpus)
        over = u - within
        cell = out[(g.team_id, gpu_type_id)]
        cell.nominal_gpu_us += g.nominal_gpus * dt
        cell.used_gpu_us += within * dt
        cell.borrowed_gpu_us += over * dt
        unused[g.team_id] = g.nominal_gpus - within
        over_by_cohort[g.cohort_id] += over
    if not any(over_by_cohort.values()):
        _price_idle(a, b, gpu_type_id, guarantees, unused, {}, prices, out)
        return
    lent: dict[int, float] = {}
    cohorts = {g.cohort_id for g in guarantees if g.cohort_id is not None}
    for cohort_id in cohorts:
        members = [g for g in guarantees if g.cohort_id == cohort_id]
        borrowing = over_by_cohort.get(cohort_id, 0)
        lendable = {
            g.team_id: min(unused[g.team_id], g.lending_limit if g.lending_limit is not None else unused[g.team_id])
            for g in members
        }
        pool = sum(lendable.values())
        if borrowing <= 0:
            continue
        share = min(1.0, borrowing / pool) if pool > 0 else 0.0
        for team_id, can in lendable.items():
            lent[team_id] = can * share
        # Borrowing beyond what the members may lend now (a lending limit lowered under running
        # borrowers: they keep their GPUs) still runs on their unused guarantees: lent beyond
        # the limit, in proportion to the unused guarantee above it, until the lender reclaims it.
        # Before 7 Dec it was lent by nobody, and the lender's guarantee read as idle.
        beyond = borrowing - pool
        extra = {g.team_id: unused[g.team_id] - lendable[g.team_id] for g in members}
        room = sum(extra.values())
        if beyond > 0 and room > 0:
            more = min(1.0, beyond / room)
            for team_id, can in extra.items():
                lent[team_id] = lent.get(team_id, 0.0) + can * more
    for team_id, gpus in lent.items():
        out[(team_id, gpu_type_id)].lent_gpu_us += gpus * dt
    _price_idle(a, b, gpu_type_id, guarantees, unused, lent, prices, out)


def _price_idle(
    a: int,
    b: int,
    gpu_type_id: int,
    guarantees: Sequence[Guarantee],
    unused: Mapping[int, int],
    lent: Mapping[int, float],
    prices: PriceBook,
    out: dict[tuple[int, int], QuotaCell],
) -> None:
    tier = prices.reserved_rate_key(gpu_type_id, a)
    for g in guarantees:
        idle = unused[g.team_id] - lent.get(g.team_id, 0.0)
        if idle <= 0 or tier is None:
            continue
        # Idle GPUs may be fractional (proportional lending): price GPU-µs, exact to 1e-6.
        idle_gpus = quantize_down(Decimal(idle))
        out[(g.team_id, gpu_type_id)].idle_cost_usd += prices.cost(gpu_type_id, tier, a, b, idle_gpus)


# ---------------------------------------------------------------------------- presentation


def apportion(values: Sequence[Decimal], quantum: Decimal = Decimal("0.01")) -> list[Decimal]:
    """Round each value to `quantum` so that the rounded values sum exactly to the rounded total
    (largest remainder method; ties go to the earlier value). A CSV of costs then adds up."""
    if not values:
        return []
    total = sum(values, Decimal(0)).quantize(quantum, rounding=ROUND_HALF_EVEN)
    floors = [v.quantize(quantum, rounding=ROUND_FLOOR) for v in values]
    units = int((total - sum(floors, Decimal(0))) / quantum)
    if units <= 0:
        return floors
    # The `units` largest remainders, ties to the earlier value: nlargest is stable like
    # sorted(..., reverse=True), and a week by job has ~7,000 rows but few cents to hand out.
    remainders = [v - f for v, f in zip(values, floors, strict=True)]
    for i in heapq.nlargest(units, range(len(values)), key=remainders.__getitem__):
        floors[i] += quantum
    return floors
