"""A job's events as stretches of time in each state."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from frontend.timeline import state_segments

T0 = datetime(2026, 11, 29, 9, 0, tzinfo=timezone.utc)


def ev(minute: int, kind: str, **data) -> dict:
    return {"created_at": T0 + timedelta(minutes=minute), "kind": kind, "reason": "", "data": data}


def stretch(state: str, start: int, end: int | None, label: str | None = None) -> dict:
    return {"state": state, "label": label or state, "start": T0 + timedelta(minutes=start),
            "end": None if end is None else T0 + timedelta(minutes=end)}


def test_a_waiting_job_has_one_open_pending_stretch():
    events = [ev(0, "job.submitted"), ev(1, "job.pending")]
    assert state_segments(events, current_state="pending") == [stretch("pending", 0, None)]


def test_a_preempted_job_waits_again_after_its_run():
    events = [
        ev(0, "job.submitted"), ev(5, "job.bound"), ev(5, "job.started"), ev(30, "job.preempting"),
        ev(31, "allocation.released"), ev(31, "job.preempted"), ev(40, "job.bound"),
    ]
    assert state_segments(events, current_state="running") == [
        stretch("pending", 0, 5), stretch("running", 5, 30), stretch("preempting", 30, 31),
        stretch("pending", 31, 40), stretch("running", 40, None),
    ]


def test_a_finished_job_ends_its_story_at_the_finish():
    events = [ev(0, "job.submitted"), ev(2, "job.bound"), ev(62, "job.finished", state="succeeded")]
    assert state_segments(events, current_state="succeeded") == [stretch("pending", 0, 2), stretch("running", 2, 62)]


def test_cancelled_while_waiting_ends_at_once():
    events = [ev(0, "job.submitted"), ev(3, "job.cancelled"), ev(3, "job.finished", state="cancelled")]
    assert state_segments(events, current_state="cancelled") == [stretch("pending", 0, 3)]


def test_cancelled_while_running_stops_first():
    events = [ev(0, "job.submitted"), ev(1, "job.bound"), ev(10, "job.cancelled"),
              ev(11, "job.finished", state="cancelled")]
    assert state_segments(events, current_state="cancelled") == [
        stretch("pending", 0, 1), stretch("running", 1, 10), stretch("preempting", 10, 11, "stopping: cancelled")]


def test_a_stopping_job_says_why_it_stops():
    """A cancel or a runtime limit stops a job in state `preempting` too; its stretch said
    "Preempting". Each stretch now carries the API's `state_label` words, and a preempted job its
    owner cancels while it stops starts a new stretch."""
    def stop(minute: int, kind: str, reason: str) -> dict:
        return {**ev(minute, kind), "reason": reason}

    cancelled = [ev(0, "job.submitted"), ev(1, "job.bound"), stop(10, "job.cancelled", "Cancelled")]
    assert state_segments(cancelled, current_state="preempting") == [
        stretch("pending", 0, 1), stretch("running", 1, 10), stretch("preempting", 10, None, "stopping: cancelled")]
    limit = [ev(0, "job.submitted"), ev(1, "job.bound"), stop(60, "job.timed_out", "RuntimeLimitExceeded")]
    assert state_segments(limit, current_state="preempting")[-1] == stretch(
        "preempting", 60, None, "stopping: runtime limit")
    preempted_then_cancelled = [
        ev(0, "job.submitted"), ev(1, "job.bound"), stop(10, "job.preempting", "Preempted"),
        stop(11, "job.cancelled", "Cancelled"), ev(12, "job.finished", state="cancelled"),
    ]
    assert state_segments(preempted_then_cancelled, current_state="cancelled") == [
        stretch("pending", 0, 1), stretch("running", 1, 10), stretch("preempting", 10, 11, "preempting"),
        stretch("preempting", 11, 12, "stopping: cancelled")]
