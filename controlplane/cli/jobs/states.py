"""The job states `qm`'s job commands name: those still active (`qm list`'s default) and those ended."""

from __future__ import annotations

ACTIVE_STATES = ["pending", "running", "preempting"]

FINISHED_STATES = {"succeeded", "failed", "cancelled", "timed_out", "unschedulable"}

#: How an ended job ended, in words for a sentence: "Job 412 (train) timed out, exit code 143.",
#: "--- job 412 succeeded ---" (until 5 Dec "ended timed_out", the state's name in the sentence).
_ENDED_WORDS = {"succeeded": "succeeded", "failed": "failed", "cancelled": "was cancelled",
                "timed_out": "timed out", "unschedulable": "can never run"}


def ended_words(state: str) -> str:
    """What an ended job did, as a sentence's verb: `ended_words("timed_out")` is "timed out"."""
    return _ENDED_WORDS.get(state, "ended " + state.replace("_", " "))
