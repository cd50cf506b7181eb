"""How the engine's sentences count, time and measure things: "1 GPU" and "8 GPUs", "45 s" and
"2.5 h", a runtime limit "1 h 30 min", "less than 0.01 GPU-hours".

Researchers read these sentences in `qm explain`, on the job page and in events; a sentence
that says "1 GPUs", "a runtime limit of 0.0 h" or "lost 0.00 GPU-hours" of work that was lost
reads as a bug even when its numbers are right. The control plane's sentences and the pages
say GPU-hours by the same rule (`gpu_hours`), so an event and the page beside it agree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, the noun's last word in the plural unless ``count`` is 1:
    ``counted(1, "H100 GPU")`` is "1 H100 GPU", ``counted(3, "node")`` "3 nodes"."""
    return f"{count} {noun if count == 1 else noun + 's'}"


def verb(count: int, singular: str, plural: str) -> str:
    """The verb agreeing with ``count``: ``verb(1, "is", "are")`` is "is", ``verb(0, "is", "are")`` "are"."""
    return singular if count == 1 else plural


def duration(seconds: float) -> str:
    """A span as a person says it: seconds below two minutes, minutes below two hours, then hours
    to a tenth. The unit is the one the rounded figure stays below the next in: 1 h 59 min 40 s
    is "2.0 h" and 119.6 s "2 min" (they were "120 min" and "120 s", where the pages said "2.0 h")."""
    if round(seconds) < 120:
        return f"{round(seconds)} s"
    if round(seconds / 60) < 120:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def distance(seconds: float) -> str:
    """How far off a time is, as the pages and qm say it (``controlplane.services.distance_text``
    is this function): ``duration``, with days to a tenth from three days on ("3.5 days", not
    "84.0 h"); a distance below zero is none. The engine's own sentences keep ``duration``."""
    seconds = max(0.0, float(seconds))
    if round(seconds / 3600, 1) < 72:
        return duration(seconds)
    return f"{seconds / 86400:.1f} days"


def span_words(seconds: float) -> str:
    """A span set by a person (a runtime limit, a checkpoint interval) exactly, as it is typed:
    "4 h", "2 h 30 min", "6 d", "45 min", "1 min 30 s" ("14400 s (4.0 h)" said it twice, and
    "2.5 h" would round 2 h 29 min). The engine's sentences, qm, the pages and the events all
    say a runtime limit so (``controlplane.services.span_text`` is this function)."""
    days, rest = divmod(int(round(seconds)), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")) if n]
    return " ".join(parts) or "0 s"


def gpu_hours(hours: float, *, about: bool = False, cell: bool = False) -> str:
    """GPU-hours as the sentences and the pages say them: two decimals, but a small non-zero
    amount never as none: "0" for nothing, "less than 0.01" below 0.01 (a preemption notice
    said "loses about 0.00 GPU-hours" of work that was lost). ``about``: the figure is an
    estimate, "about 6.68" (a bound or nothing reads as it is, not "about less than 0.01");
    ``cell``: "< 0.01", as a table's cell says it."""
    if hours == 0:
        return "0"
    if abs(hours) < 0.01:
        return "< 0.01" if cell else "less than 0.01"
    return f"about {hours:,.2f}" if about else f"{hours:,.2f}"


def gang_roles(roles: Sequence[Mapping[str, Any]]) -> str:
    """A heterogeneous gang's roles in a line, as its submitted event, the job page and
    ``qm status`` say them: ``learner 1×8 GPUs (of H100-80GB) + rollout 4×1 GPU (of A100-40GB)``.
    Each role as the API gives it: ``name``, ``count``, ``gpus_per_member``, ``gpu_types``."""
    parts = []
    for role in roles:
        part = f"{role['name']} {role['count']}×{counted(role['gpus_per_member'], 'GPU')}"
        if role.get("gpu_types"):
            part += f" (of {'/'.join(role['gpu_types'])})"
        parts.append(part)
    return " + ".join(parts)


def job_names(ids: list[str]) -> str:
    """Job ids as a sentence names them ("job 12", "jobs 12, 15"): in the control plane they
    are bare numbers."""
    return ("job " if len(ids) == 1 else "jobs ") + ", ".join(ids)
