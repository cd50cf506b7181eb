"""What qm says of the scheduling loop when it has stalled or has never run, in one place:
`qm sinfo` and `qm explain`/`qm status` (a line of their report), `qm list` and `qm sprio` (on
stderr, so their table stays parseable when piped). Each reads the `loop` of the answer it
already has (api/serializers/scheduling_loop.py: /healthz's; `qm status` the job's own, jobs/{id}/): a waiting job's reason, place and ETA are
the last cycle's word, so a dead loop's read as a healthy queue's until 7 Dec. `qm` imports no
Django, and neither does this module."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from controlplane.cli import output


def loop_warning(loop: Mapping[str, Any] | None, dated: str = "") -> str:
    """The loop's state in a sentence when it has stalled or has never run, "" when it runs (or
    the answer has no `loop`: a server from before 7 Dec). `dated` names what the command showed
    that is as of the last cycle ("the reasons above"); "" when nothing it shows is."""
    if not loop:
        return ""
    if loop.get("stalled") is None and not loop.get("last_cycle_at"):
        return "No scheduling cycle has run yet: no job starts until the scheduling loop runs (qm config)."
    if not loop.get("stalled"):
        return ""
    age, last = output.human_distance(loop.get("last_cycle_age_s") or 0), output.utc_text(loop.get("last_cycle_at"))
    as_of = f"{dated} are as of then, and " if dated else ""
    return (f"The scheduling loop has stalled: no cycle has committed for {age} (the last at {last}); "
            f"{as_of}no job starts until it runs again (/healthz, qm config).")


def warn(loop: Mapping[str, Any] | None, dated: str = "") -> None:
    """A list's warning, on stderr after its table (stdout flushed first, so a terminal shows it
    below): piped, the table stays the table."""
    if words := loop_warning(loop, dated):
        sys.stdout.flush()
        output.note(words, out=sys.stderr)
