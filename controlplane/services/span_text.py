"""How a span of time set by a person is said, in one place: a job's runtime limit (and its
checkpoint interval) in `qm submit`, `qm status` and `qm sprio`, the change sentences
(`runtime limit 4 h → 2 h`), the job page, its queue row, and the submit event. `qm` imports no
Django, and neither does this module.

Said exactly, as it is typed (`--time 1h30m`), in the units a researcher reads: `2 h`,
`1 h 30 min`, `45 min`, `1 d 12 h`, `1 min 30 s`. Until 7 Dec a runtime limit was
spelled four ways: `limit 2h` (qm), `2 h → 3 h` (the change sentence), `runtime limit 2.0 h`
and `60 min` for an hour (the events), `2.0 h` (the job page); and `2.5 h` rounded a limit of
2 h 29 min.
"""

from __future__ import annotations


def span_words(seconds: float) -> str:
    """A span exactly, as it is typed: "4 h", "2 h 30 min", "6 d", "45 min", "1 min 30 s"
    ("14400 s (4.0 h)" said it twice, and "2.5 h" would round)."""
    days, rest = divmod(int(round(seconds)), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")) if n]
    return " ".join(parts) or "0 s"
