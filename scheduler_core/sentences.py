"""How the engine's sentences count and time things: "1 GPU" and "8 GPUs", "45 s" and "2.5 h".

Researchers read these sentences in `qm explain`, on the job page and in events; a sentence
that says "1 GPUs" or "a runtime limit of 0.0 h" reads as a bug even when its numbers are right.
"""

from __future__ import annotations


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, the noun's last word in the plural unless ``count`` is 1:
    ``counted(1, "H100 GPU")`` is "1 H100 GPU", ``counted(3, "node")`` "3 nodes"."""
    return f"{count} {noun if count == 1 else noun + 's'}"


def verb(count: int, singular: str, plural: str) -> str:
    """The verb agreeing with ``count``: ``verb(1, "is", "are")`` is "is", ``verb(0, "is", "are")`` "are"."""
    return singular if count == 1 else plural


def duration(seconds: float) -> str:
    """A span as a person says it: seconds below two minutes, minutes below two hours, then hours."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
