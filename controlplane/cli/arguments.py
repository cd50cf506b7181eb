"""What the commands' arguments say, read alike by every command: a job id (`qm status 412`,
`qm sprio 412`), a job array's id (`--array`) and a length of time (`--time 4h`, `--checkpoint-every 30m`, `qm maint --duration 4h`)."""

from __future__ import annotations

import uuid

from controlplane.cli import output
from controlplane.cli.client import UsageError

#: sbatch reads `--time 30` as 30 minutes, and so does qm's `--time` (it read 30 seconds, and a
#: Slurm user's job was killed at half a minute); other durations' bare numbers are seconds.
TIME_BARE_UNIT = 60


def duration(text: str, flag: str, bare: int = 1) -> int:
    try:
        return output.parse_duration(text, bare)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from exc


def array_id(text: str) -> str:
    """A job array's id as the API spells it (`qm list --array`, `qm cancel --array`)."""
    try:
        return str(uuid.UUID(text.strip()))
    except ValueError:
        raise UsageError(f"--array: '{text}' is not an array id (a UUID, as `qm submit --array` printed)") from None


def job_id(text: str, array_flag: str | None = None, array_use: str = "") -> int:
    """A job's id. A job array's id given instead (the one id `qm submit --array` prints) is
    said to be an array's, with what takes it: `array_flag` ("qm cancel --array"), how the
    command acts on a whole array (scancel takes an array's id in place); else `qm list --array`,
    which lists its tasks and their job ids, after `array_use` (how the command changes a whole
    array, if it can), for a command that reads or changes one job."""
    if not (text.isascii() and text.isdigit()):  # int() refuses '²', which isdigit() accepts
        if _is_uuid(text):
            array = text.strip()
            if array_flag is not None:
                raise UsageError(f"'{text}' is a job array's id, not a job's: {array_flag} {array}")
            raise UsageError(f"'{text}' is a job array's id, not a job's: {array_use}"
                           f"qm list --array {array} lists its tasks, each with its job id")
        raise UsageError(f"'{text}' is not a job id (a number, as `qm list` shows)")
    return int(text)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text.strip())
    except ValueError:
        return False
    return True
