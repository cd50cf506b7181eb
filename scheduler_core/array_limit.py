"""Phase 1b: a job array's task limit (Slurm's ``--array=0-99%10``, reason ``JobArrayTaskLimit``).

A sweep of a thousand tasks submitted with a limit of ten runs ten at a time, so one user's
array does not take the fleet even where quota would let it. Tasks of the array that run (or
stop, still holding GPUs), that the cycle binds, or for which it preempts count against the
limit; once it is reached the array's other tasks keep their place in the queue but are not
tried: they take no placement attempt, no reservation and no victim, and say how many of the
array's tasks run. Phase 7 (``explain``) gives every waiting task of the array, in queue order,
a start no earlier than its array has a slot for it (:meth:`ArrayTaskCounts.slot`), whether
the limit kept it untried or it was tried and waits for something else.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

from scheduler_core.outcome import Outcome
from scheduler_core.sentences import counted, verb
from scheduler_core.types import JobSpec, ReasonCode, RunningJob


class ArrayTaskCounts:
    """Per array: the jobs holding or about to hold GPUs (running, bound or nominated), and, in
    phase 7, the slots its waiting tasks take in queue order."""

    __slots__ = ("members", "slots", "ahead", "nominated_ends")

    def __init__(self, running: Iterable[RunningJob]) -> None:
        self.members: dict[str, list[str]] = {}
        #: per array, when each of its ``array_task_limit`` slots frees up next, once the tasks
        #: already explained this cycle (in queue order) have each taken one (a heap; built at
        #: its first waiting task in phase 7)
        self.slots: dict[str, list[float]] = {}
        #: per array, its tasks ahead of the next waiting one: holding GPUs, or waiting ahead
        self.ahead: dict[str, int] = {}
        #: when each task nominated this cycle (it starts once its victims have stopped) ends
        #: by its runtime limit: the cycle's ``ends`` know only the running and bound jobs
        self.nominated_ends: dict[str, float] = {}
        for job in running:
            if job.spec.array_id:
                self.members.setdefault(job.spec.array_id, []).append(job.spec.id)

    def full(self, spec: JobSpec) -> bool:
        """Has ``spec``'s array reached its task limit?"""
        limit = spec.array_task_limit
        return (limit is not None and limit >= 1 and bool(spec.array_id)
                and len(self.members.get(spec.array_id, ())) >= limit)

    def started(self, spec: JobSpec, nominated_from: float | None = None) -> None:
        """``spec`` is bound or nominated (to start at ``nominated_from``) this cycle: one more
        of its array's tasks."""
        if spec.array_id:
            self.members.setdefault(spec.array_id, []).append(spec.id)
            if nominated_from is not None and spec.runtime_limit_s is not None:
                self.nominated_ends[spec.id] = nominated_from + spec.runtime_limit_s

    def outcome(self, spec: JobSpec) -> Outcome:
        """Why ``spec`` is not tried: its array's tasks that count. Its start is the slot it
        takes in phase 7 (:meth:`slot`)."""
        limit = spec.array_task_limit or 0
        members = self.members.get(spec.array_id, [])
        return Outcome(
            ReasonCode.ARRAY_TASK_LIMIT,
            f"Its array runs at most {counted(limit, 'task')} at a time and "
            f"{counted(len(members), 'task')} of it {verb(len(members), 'holds', 'hold')} GPUs "
            f"now; it keeps its place in the queue and is tried once "
            f"{verb(len(members), 'it', 'one of them')} ends.",
            True,
            "a running task of its array ends, or the array's task limit is raised",
        )

    def holds(self, spec: JobSpec) -> bool:
        """Is ``spec`` one of the tasks that hold a slot already (nominated this cycle)?"""
        return spec.id in self.members.get(spec.array_id, ())

    def slot(self, spec: JobSpec, ends: dict[str, float], now: float) -> float:
        """The earliest time the array of ``spec`` (a task waiting, valid, in queue order) has
        a slot for it, ``inf`` when none is known: the k-th waiting task (counting in queue
        order) starts no earlier than the k-th slot to free up, a slot being free now while the
        array holds fewer tasks than its limit, else freeing when a task holding it ends by its
        runtime limit (``ends``), and each waiting task ahead of it taking the next free slot
        (:meth:`take`) from its own start for its own limit. Every task of a 100-task array
        at its limit said the first slot's time, as if all could start then; and before any
        task ran, all of them said their own start, the limit unseen."""
        slots = self.slots.get(spec.array_id)
        if slots is None:
            limit = spec.array_task_limit or 0
            members = self.members.get(spec.array_id, [])
            # each end beyond the first len(members) - limit frees a slot (a task with no limit:
            # never); a task nominated this cycle ends its runtime limit after its start (it
            # counted as never ending: the task behind it was told no start)
            nominated = self.nominated_ends
            ended = sorted([ends[j] if j in ends else nominated.get(j, math.inf) for j in members])
            slots = self.slots[spec.array_id] = (
                [now] * (limit - len(members)) + ended[max(len(members) - limit, 0):])  # sorted: a heap
            self.ahead[spec.array_id] = len(members)
        return slots[0] if slots else math.inf

    def take(self, spec: JobSpec, start: float | None) -> None:
        """``spec`` takes the array's next free slot from ``start`` (``None``: unknown) for its
        runtime limit, the next task in line the next free one."""
        slots = self.slots[spec.array_id]
        runtime = spec.runtime_limit_s
        if slots:
            begins = slots[0] if start is None or start < slots[0] else start
            heapq.heapreplace(slots, begins + runtime if runtime is not None and start is not None
                              else math.inf)
        self.ahead[spec.array_id] += 1
