"""A job's audit trail as stretches of time in each state, for the Gantt-style timeline.

This reads the events the control plane recorded; it changes nothing and decides nothing.
Each event kind that moves a job names the state it moves to; events that do not move it
(a new reason to wait, an allocation released) appear only as marks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from controlplane.choices import EventKind, JobState
from controlplane.services.stopping import stopping_label
from controlplane.services.transitions import RELEASE_CANCELLED, RELEASE_PREEMPTED, RELEASE_RUNTIME_LIMIT

# The state a job is in after each kind of event. JOB_FINISHED names its state in its data.
STATE_AFTER = {
    EventKind.JOB_SUBMITTED: JobState.PENDING,
    EventKind.JOB_BOUND: JobState.RUNNING,
    EventKind.JOB_STARTED: JobState.RUNNING,
    EventKind.JOB_PREEMPTING: JobState.PREEMPTING,
    EventKind.JOB_STOPPING: JobState.PREEMPTING,
    EventKind.JOB_TIMED_OUT: JobState.PREEMPTING,
    EventKind.JOB_PREEMPTED: JobState.PENDING,
    EventKind.JOB_REQUEUED: JobState.PENDING,
    EventKind.JOB_RESIZED: JobState.PENDING,
}
TERMINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT, JobState.UNSCHEDULABLE}


def _state_after(event: Mapping[str, Any], current: str | None) -> str | None:
    kind = event["kind"]
    if kind == EventKind.JOB_FINISHED:
        named = (event.get("data") or {}).get("state")
        if named in JobState.values:
            return str(named)
        return JobState.CANCELLED if event.get("reason") == "Cancelled" else current
    if kind == EventKind.JOB_CANCELLED:
        # Cancelled while waiting: done at once. Cancelled while running: stopping first.
        return JobState.CANCELLED if current in (None, JobState.PENDING) else JobState.PREEMPTING
    state = STATE_AFTER.get(kind)
    return str(state) if state is not None else current


#: The events that start a stop (their reason is the stop's release reason), and the release
#: reason each implies when an event records none (a `job.stopping` always records one; an old
#: `job.preempting`, stored before migration 0032, of a resize or a requeue asked for is labelled
#: by its reason as the new kind is).
STOP_KINDS = {
    EventKind.JOB_PREEMPTING: RELEASE_PREEMPTED,
    EventKind.JOB_STOPPING: "",
    EventKind.JOB_TIMED_OUT: RELEASE_RUNTIME_LIMIT,
    EventKind.JOB_CANCELLED: RELEASE_CANCELLED,
}


def state_segments(events: Sequence[Mapping[str, Any]], *, current_state: str) -> list[dict[str, Any]]:
    """[{state, label, start, end}] in time order; the last stretch of a job not yet finished has
    end None (it lasts until now). Finished states get no stretch: the job's story ends there.
    `label` is the state, except while stopping (`preempting`, whatever stops the job): why, as
    the API's `state_label` says it ("stopping: cancelled", "stopping: runtime limit",
    "preempting"); a preempted job its owner then cancels starts a new stretch."""
    segments: list[dict[str, Any]] = []
    state: str | None = None
    label: str | None = None
    since: datetime | None = None
    for event in events:
        after = _state_after(event, state)
        if after == JobState.PREEMPTING and event["kind"] in STOP_KINDS:
            after_label = stopping_label(event.get("reason") or STOP_KINDS[event["kind"]])
        else:
            after_label = label if after == state else after
        if after == state and after_label == label:
            continue
        if state is not None and since is not None and state not in TERMINAL:
            segments.append({"state": state, "label": label, "start": since, "end": event["created_at"]})
        state, label, since = after, after_label, event["created_at"]
    if state is not None and since is not None and state not in TERMINAL and current_state not in TERMINAL:
        segments.append({"state": state, "label": label, "start": since, "end": None})
    return segments
