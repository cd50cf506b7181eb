"""The job states `qm`'s job commands name: those still active (`qm list`'s default) and those ended."""

from __future__ import annotations

import argparse

ACTIVE_STATES = ["pending", "running", "preempting"]

FINISHED_STATES = {"succeeded", "failed", "cancelled", "timed_out", "unschedulable"}

#: Every state a job may be in, as the API names them.
QM_STATES = {*ACTIVE_STATES, *FINISHED_STATES}

#: How an ended job ended, in words for a sentence: "Job 412 (train) timed out, exit code 143.",
#: "--- job 412 succeeded ---" (until 5 Dec "ended timed_out", the state's name in the sentence).
_ENDED_WORDS = {"succeeded": "succeeded", "failed": "failed", "cancelled": "was cancelled",
                "timed_out": "timed out", "unschedulable": "can never run"}


def ended_words(state: str) -> str:
    """What an ended job did, as a sentence's verb: `ended_words("timed_out")` is "timed out"."""
    return _ENDED_WORDS.get(state, "ended " + state.replace("_", " "))


#: Slurm's names for job states as squeue -t, sacct -s and scancel -t take them (codes and words,
#: any case) → qm's. qm's stopping state (`preempting`, whatever stops the job; `qm list` says
#: `stopping: ...`) is Slurm's COMPLETING: the processes are being told to exit.
SLURM_STATES = {"pd": "pending", "r": "running", "cg": "preempting", "completing": "preempting",
                "stopping": "preempting", "cd": "succeeded", "completed": "succeeded", "f": "failed",
                "ca": "cancelled", "canceled": "cancelled", "to": "timed_out", "timeout": "timed_out"}


def states_given(text: str) -> list[str]:
    """A --state value as squeue -t reads one: one state or several separated by commas, in any
    case, qm's names or Slurm's (`-t PD,R`, `-t RUNNING`, `-s CD,F`). `qm list -t PENDING` and
    `-t pending,running` were refused by the API ("'pending,running' is not a valid choice"). A
    word neither knows is passed on as typed, for the API to refuse with the states there are."""
    words = [word.strip() for word in text.split(",") if word.strip()]
    if not words:
        raise argparse.ArgumentTypeError("give a state, e.g. pending, running, or Slurm's PD,R")
    return [_qm_state(word) for word in words]


def _qm_state(word: str) -> str:
    name = word.lower().replace("-", "_")
    return SLURM_STATES.get(name) or (name if name in QM_STATES else word)
