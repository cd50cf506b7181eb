"""The job states `qm`'s job commands name: those still active (`qm list`'s default) and those ended."""

from __future__ import annotations

ACTIVE_STATES = ["pending", "running", "preempting"]

FINISHED_STATES = {"succeeded", "failed", "cancelled", "timed_out", "unschedulable"}
