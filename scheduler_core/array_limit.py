"""Phase 1b: a job array's task limit (Slurm's ``--array=0-99%10``, reason ``JobArrayTaskLimit``).

A sweep of a thousand tasks submitted with a limit of ten runs ten at a time, so one user's
array does not take the fleet even where quota would let it. Tasks of the array that run (or
stop, still holding GPUs), that the cycle binds, or for which it preempts count against the
limit; once it is reached the array's other tasks keep their place in the queue but are not
tried: they take no placement attempt, no reservation and no victim, and say how many of the
array's tasks run and when the first of those ends by its runtime limit.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

from scheduler_core.outcome import Outcome
from scheduler_core.sentences import counted, verb
from scheduler_core.types import JobSpec, ReasonCode, RunningJob


class ArrayTaskCounts:
    """Per array: the jobs holding or about to hold GPUs (running, bound or nominated)."""

    __slots__ = ("members", "throttled")

    def __init__(self, running: Iterable[RunningJob]) -> None:
        self.members: dict[str, list[str]] = {}
        #: per array, when each of its slots frees up next, once the tasks already left untried
        #: this cycle (in queue order) have each taken one (a heap; built at its first such task)
        self.throttled: dict[str, list[float]] = {}
        for job in running:
            if job.spec.array_id:
                self.members.setdefault(job.spec.array_id, []).append(job.spec.id)

    def full(self, spec: JobSpec) -> bool:
        """Has ``spec``'s array reached its task limit?"""
        limit = spec.array_task_limit
        return (limit is not None and limit >= 1 and bool(spec.array_id)
                and len(self.members.get(spec.array_id, ())) >= limit)

    def started(self, spec: JobSpec) -> None:
        """``spec`` is bound or nominated this cycle: one more of its array's tasks."""
        if spec.array_id:
            self.members.setdefault(spec.array_id, []).append(spec.id)

    def outcome(self, spec: JobSpec, ends: dict[str, float]) -> Outcome:
        """Why ``spec`` is not tried: its array's tasks that count, and when there is room for
        it: the k-th task left untried (in queue order) starts no earlier than the k-th slot to
        free up, a slot freeing when a task holding it ends by its runtime limit (``ends``) and
        each task ahead of it in line taking the next free slot for its own limit. Every task
        of a 100-task array said the first slot's time, as if all could start then."""
        limit = spec.array_task_limit or 0
        members = self.members.get(spec.array_id, [])
        slots = self.throttled.get(spec.array_id)
        if slots is None:
            # each end beyond the first len(members) - limit frees a slot (a task with no limit: never)
            ended = sorted([ends[j] for j in members if j in ends] + [math.inf] * sum(j not in ends for j in members))
            slots = self.throttled[spec.array_id] = ended[max(len(members) - limit, 0):]  # sorted: a heap
        eta = slots[0] if slots and slots[0] < math.inf else None
        if slots:  # this task takes that slot for its runtime limit; the next one in line the next free
            runtime = spec.runtime_limit_s
            heapq.heapreplace(slots, slots[0] + runtime if runtime is not None else math.inf)
        return Outcome(
            ReasonCode.ARRAY_TASK_LIMIT,
            f"Its array runs at most {counted(limit, 'task')} at a time and "
            f"{counted(len(members), 'task')} of it {verb(len(members), 'holds', 'hold')} GPUs "
            f"now; it keeps its place in the queue and is tried once one of them ends.",
            True,
            "a running task of its array ends, or the array's task limit is raised",
            eta=eta,
        )
