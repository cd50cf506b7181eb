"""What a replay measured, defined exactly as the seed program (000, gpusched.py) defines it.

The seed steps a clock minute by minute; after the scheduling pass of minute ``t`` it adds the
allocated GPUs, and, when some waiting job needs at least one whole node, the free GPUs on
partially used nodes, to running sums that it divides by the horizon. Our replay is event
driven, so the state after the pass at one event time holds until the next: integrating that
piecewise-constant state over ``[0, horizon)`` gives the same numbers whenever events fall on
the minute grid (every seed trace does).

Waits follow the seed too: a job is *done* when it ended strictly before the horizon (the
seed's last completion check is at minute ``horizon - 1``); small means fewer GPUs than a
node (``scheduler_core.judging.size_class``); the p95 is ``sorted(waits)[min(n - 1, int(0.95 * n))]``; means are plain means over done
jobs. ``wait_mean_min`` and ``wait_max_min`` cover *every* job submitted before the horizon,
counting a job still waiting at the horizon as having waited until then, so a scheduler
cannot look good by never starting a job. ``mean_slowdown`` is the mean over done jobs of
(end - submit) / true duration, the duration floored at :data:`SLOWDOWN_FLOOR_S` as in the
engine's fleet figures, so a few-second job in a public trace cannot dominate the mean.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scheduler_core.judging import SMALL, judge_etas, p95, size_class

#: Durations shorter than this count as this long in slowdowns (bounded slowdown).
SLOWDOWN_FLOOR_S = 60.0

#: Keys the simulator's JSON always carries (the issue's list), in print order.
METRIC_KEYS: tuple[str, ...] = (
    "allocated",
    "stranded_gpus",
    "wait_small_mean_min",
    "wait_small_p95_min",
    "wait_large_mean_min",
    "wait_large_p95_min",
    "wait_mean_min",
    "wait_max_min",
    "jobs_done",
    "jobs_total",
    "mean_slowdown",
)


class TimeIntegral:
    """Integral over ``[0, horizon)`` of a piecewise-constant quantity.

    Call :meth:`set` with each new value at the time it takes effect (times never go back);
    :meth:`area` closes the last piece at the horizon."""

    def __init__(self, horizon_s: float) -> None:
        self.horizon_s = horizon_s
        self._since = 0.0
        self._value = 0.0
        self._area = 0.0

    def set(self, at_s: float, value: float) -> None:
        if at_s < self._since:
            raise ValueError(f"time went back: value set at {at_s} s after one set at {self._since} s")
        self._area += self._value * (min(at_s, self.horizon_s) - min(self._since, self.horizon_s))
        self._since = at_s
        self._value = value

    def area(self) -> float:
        end = max(self._since, self.horizon_s)
        return self._area + self._value * (min(end, self.horizon_s) - min(self._since, self.horizon_s))


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """How one submitted job fared by the horizon.

    ``wait_s``: total time spent pending (every stretch in the queue, including requeues after
    a preemption), up to the horizon for a job still pending then. ``end_s``: when it finished
    (ran to completion or was killed at its runtime limit), ``None`` if it had not."""

    job_id: str
    gpus: int
    submit_s: float
    duration_s: float
    wait_s: float
    end_s: float | None

    def done_by(self, horizon_s: float) -> bool:
        return self.end_s is not None and self.end_s < horizon_s


def allocated_upper_bound(
    jobs: Iterable[tuple[float, int, float]], *, horizon_s: float, total_gpus: int
) -> float:
    """The most any scheduler could allocate over ``[0, horizon)``, as a fraction of capacity.

    ``jobs`` are ``(submit_s, gpus, duration_s)``. Even a scheduler that may preempt, split
    jobs across any GPUs and knows every duration is bound by a cut of the flow of work into
    time: for any instant ``s``, what runs in ``[s, horizon)`` is at most the capacity, and
    what runs in ``[0, s)`` is at most what each job could do at full width since its
    submission. So ``busy ≤ min over s of [G·(horizon − s) + Σ_j g_j·clip(s − r_j, 0, d_j)]``.
    At ``s = horizon`` this is the no-wait bound (every job starts at submission), at
    ``s = 0`` the capacity. The function is piecewise linear in ``s``, so a sweep over its
    breakpoints (submissions and ends) finds the minimum in ``O(n log n)``."""
    if horizon_s <= 0 or total_gpus <= 0:
        raise ValueError(f"horizon and GPUs must be > 0, got {horizon_s} s and {total_gpus}")
    slope_changes: dict[float, float] = {}
    for submit, gpus, duration in jobs:
        if submit >= horizon_s:
            continue
        start = max(0.0, submit)
        end = min(submit + duration, horizon_s)
        if end <= start:
            continue
        slope_changes[start] = slope_changes.get(start, 0.0) + gpus
        slope_changes[end] = slope_changes.get(end, 0.0) - gpus
    at, value = 0.0, float(total_gpus) * horizon_s
    slope = -float(total_gpus)
    best = value
    for point in sorted(slope_changes):
        value += slope * (point - at)
        at = point
        best = min(best, value)
        slope += slope_changes[point]
    value += slope * (horizon_s - at)
    best = min(best, value)
    return best / (horizon_s * total_gpus)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(
    outcomes: Sequence[JobOutcome],
    *,
    horizon_s: float,
    total_gpus: int,
    gpus_per_node: int,
    allocated_gpu_seconds: float,
    stranded_gpu_seconds: float,
) -> dict[str, float | int | None]:
    """The simulator's metrics (:data:`METRIC_KEYS`) from job outcomes and two integrals.

    Only jobs submitted before the horizon count. A statistic over an empty set of jobs is
    ``None`` (JSON ``null``), never a made-up zero."""
    if horizon_s <= 0:
        raise ValueError(f"horizon must be > 0 s, got {horizon_s}")
    if total_gpus <= 0:
        raise ValueError(f"total GPUs must be > 0, got {total_gpus}")
    submitted = [o for o in outcomes if o.submit_s < horizon_s]
    done = [o for o in submitted if o.done_by(horizon_s)]
    small = sorted(o.wait_s / 60.0 for o in done if size_class(o.gpus, gpus_per_node) == SMALL)
    large = sorted(o.wait_s / 60.0 for o in done if size_class(o.gpus, gpus_per_node) != SMALL)
    every_wait = [o.wait_s / 60.0 for o in submitted]
    slowdowns = [(o.end_s - o.submit_s) / max(o.duration_s, SLOWDOWN_FLOOR_S) for o in done if o.end_s is not None]
    return {
        "allocated": allocated_gpu_seconds / (horizon_s * total_gpus),
        "stranded_gpus": stranded_gpu_seconds / horizon_s,
        "wait_small_mean_min": _mean(small),
        "wait_small_p95_min": p95(small) if small else None,
        "wait_large_mean_min": _mean(large),
        "wait_large_p95_min": p95(large) if large else None,
        "wait_mean_min": _mean(every_wait),
        "wait_max_min": max(every_wait) if every_wait else None,
        "jobs_done": len(done),
        "jobs_total": len(submitted),
        "mean_slowdown": _mean(slowdowns),
    }


def eta_figures(errors_s: Sequence[float], missing: int, *, shares: Sequence[float] = ()
                ) -> dict[str, float | int | None]:
    """How far the ETAs the engine tells waiting jobs can be trusted.

    ``errors_s``: per stretch of waiting that was given an ETA, its start minus the *first* ETA
    it was told (what a researcher reads when the job starts to wait); negative is early.
    ``missing``: stretches explained without any ETA. The engine's ETAs assume every running
    job runs to its runtime limit and no job arrives ahead of this one, so a start later than
    told means later arrivals went first (priority, fair share, a reclaiming owner) or a
    reservation moved. ``eta_on_time``: the share started no later than told (``None`` when no
    ETA was judged); ``eta_early_median_min``: how much sooner than told the on-time ones
    started; ``eta_late_p95_min`` and ``eta_late_max_min``: lateness over every judged stretch
    (zero for those on time). ``shares``: per judged stretch, the wait it had ÷ the wait it was
    told, both from when it was told; ``eta_median_share_of_wait`` is their median (the seed's
    index rule), the figure the control plane reports as ``median_share_of_wait``."""
    judged = judge_etas(errors_s, shares)
    return {
        "eta_checked": judged.judged,
        "eta_missing": missing,
        "eta_on_time": judged.on_time,
        "eta_early_median_min": _minutes(judged.median_early_s),
        "eta_late_p95_min": _minutes(judged.late_p95_s),
        "eta_late_max_min": _minutes(judged.late_max_s),
        "eta_median_share_of_wait": judged.median_share_of_wait,
    }


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else seconds / 60.0


def team_figures(
    outcomes: Sequence[JobOutcome], *, horizon_s: float, allocated_gpu_seconds: float
) -> dict[str, float | int | None]:
    """One team's share of a replay: its jobs submitted before the horizon and finished by it,
    the mean and p95 of their waits (every submitted job, a job still waiting counted until the
    horizon, as ``wait_mean_min``), and the GPU-hours it held over ``[0, horizon)``."""
    submitted = [o for o in outcomes if o.submit_s < horizon_s]
    waits = sorted(o.wait_s / 60.0 for o in submitted)
    return {
        "jobs_total": len(submitted),
        "jobs_done": sum(1 for o in submitted if o.done_by(horizon_s)),
        "wait_mean_min": _mean(waits),
        "wait_p95_min": p95(waits) if waits else None,
        "allocated_gpu_hours": allocated_gpu_seconds / 3600.0,
    }
