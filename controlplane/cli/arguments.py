"""What the commands' arguments say, read alike by every command: a job id (`qm status 412`,
`qm sprio 412`), a job array's id (`--array`) and a length of time (`--time 4h`, `--checkpoint-every 30m`, `qm maint --duration 4h`)."""

from __future__ import annotations

import uuid

from controlplane.cli import output
from controlplane.cli.client import CliError

#: sbatch reads `--time 30` as 30 minutes, and so does qm's `--time` (it read 30 seconds, and a
#: Slurm user's job was killed at half a minute); other durations' bare numbers are seconds.
TIME_BARE_UNIT = 60


def duration(text: str, flag: str, bare: int = 1) -> int:
    try:
        return output.parse_duration(text, bare)
    except ValueError as exc:
        raise CliError(f"{flag}: {exc}") from exc


def array_id(text: str) -> str:
    """A job array's id as the API spells it (`qm list --array`, `qm cancel --array`)."""
    try:
        return str(uuid.UUID(text.strip()))
    except ValueError:
        raise CliError(f"'{text}' is not an array id (a UUID, as `qm submit --array` printed)") from None


def job_id(text: str, array_flag: str | None = None) -> int:
    """A job's id; `array_flag` ("qm cancel --array") is how the command takes a job array's id
    instead, said when one is given where a job's is (scancel takes an array's id in place)."""
    if not (text.isascii() and text.isdigit()):  # int() refuses '²', which isdigit() accepts
        if array_flag is not None and _is_uuid(text):
            raise CliError(f"'{text}' is a job array's id, not a job's: {array_flag} {text.strip()}")
        raise CliError(f"'{text}' is not a job id (a number, as `qm list` shows)")
    return int(text)


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text.strip())
    except ValueError:
        return False
    return True
