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
