"""A job's exit code, one convention whoever reports it.

A process killed by signal N ends with N as Python's `Popen.returncode` says it (-9), but with
128 + N once a shell ran it (`bash -c`: 137), which is how Docker, Kubernetes and Slurm's
derived exit code say it too. The agent reports what its shell or the process gave, so the same
out-of-memory kill read -9 for one job and 137 for another. Reports are stored in the shell's
convention, and a code of a signal death is said with the signal's name."""

from __future__ import annotations

import signal

#: Exit codes 129..192 are a shell's report of signals 1..64.
SIGNAL_BASE = 128
MAX_SIGNAL = 64


def from_report(code: int | None) -> int | None:
    """The exit code to store for a reported one: -N (killed by signal N) becomes 128 + N."""
    if code is not None and -MAX_SIGNAL <= code < 0:
        return SIGNAL_BASE - code
    return code


def said(code: int) -> str:
    """`137 (SIGKILL)`; a code that is no signal death as it is (`1`)."""
    if SIGNAL_BASE < code <= SIGNAL_BASE + MAX_SIGNAL:
        try:
            return f"{code} ({signal.Signals(code - SIGNAL_BASE).name})"
        except ValueError:
            return str(code)
    return str(code)


#: The exit status of a followed job that ended without a code of its own to carry (cancelled
#: before it started, found it can never run, a failure no agent reported a code of).
NO_CODE_STATUS = 1


def followed_status(state: str, code: int | None) -> int:
    """The exit status `qm logs -f` and `qm events -f` end with under `--exit-with-job`, as
    Slurm's `srun` and `sattach` carry the job's: 0 when it succeeded; else its exit code when it
    has one that is not 0 (a failure's N, 137 of one killed by SIGKILL, the 143 of a job SIGTERM
    stopped when cancelled or timed out); else `NO_CODE_STATUS`, so an ended job that did not
    succeed never reads as success. A requeued job is followed into its next run: its last one
    decides."""
    if state == "succeeded":
        return 0
    if code is not None and 0 < code < 256:
        return code
    return NO_CODE_STATUS
