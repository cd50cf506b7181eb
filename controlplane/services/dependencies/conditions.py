"""What each dependency condition means, judged on an upstream job's state: met now
(`is_met`), or never to be (`never_met`); the limits on what one job may wait on, the reasons a
dependency's events and cancels carry, and `Change`, an upstream job that just started or ended."""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.choices import FINISHED_JOB_STATES, DependencyCondition, JobState

#: The most dependencies one submit may list (each a job, or a whole job array).
MAX_DEPENDENCIES = 64

#: The most upstream jobs one job may wait on, once arrays are counted task by task.
MAX_UPSTREAM_JOBS = 10_000

#: The reason a job is cancelled with when a dependency of it can no longer be met.
NEVER_SATISFIED = "DependencyNeverSatisfied"

#: The reason of the event saying a dependency is met.
SATISFIED = "DependencySatisfied"

_ENDED_BADLY = frozenset({JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT, JobState.UNSCHEDULABLE})

_FINISHED = frozenset(FINISHED_JOB_STATES)

_STARTED = frozenset({JobState.RUNNING, JobState.PREEMPTING}) | _FINISHED


def is_met(condition: str, state: str, *, has_started: bool = False) -> bool:
    """Whether a job in `state` meets `condition` now. `has_started`: it ran before and was
    requeued (pending again), which still meets ``after``."""
    if condition == DependencyCondition.AFTER:
        return state in _STARTED or has_started
    if condition == DependencyCondition.AFTER_OK:
        return state == JobState.SUCCEEDED
    if condition == DependencyCondition.AFTER_NOT_OK:
        return state in _ENDED_BADLY
    return state in _FINISHED  # afterany


def never_met(condition: str, state: str) -> bool:
    """Whether `condition` can no longer be met by a job in `state` (it ended otherwise)."""
    if condition == DependencyCondition.AFTER_OK:
        return state in _ENDED_BADLY
    if condition == DependencyCondition.AFTER_NOT_OK:
        return state == JobState.SUCCEEDED
    return False


@dataclass(frozen=True)
class Change:
    """A job that started or ended: its new state and, once ended, its exit code."""

    job_id: int
    state: str
    exit_code: int | None = None
    # A job cancelled down a chain (its own dependency never met): the job whose end began it and
    # what became of it, (107, "failed (exit 3)"), so each job further down names the cause.
    because: tuple[int, str] | None = None
