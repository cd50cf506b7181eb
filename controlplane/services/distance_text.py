"""How far off a time is, in one place: how long ago something happened ("18 min ago") and how far
an ETA is ("in 10 min"), as the pages say it (the `duration`, `age`, `until` and `eta_until`
template filters) and as `qm` says it (`output.human_distance`, `output.ago`: `qm list`'s START,
`qm explain`'s latest and likely start and first ETA, `qm status`'s last checkpoint). `qm` imports
no Django, and neither does this module.

The rule is the engine's sentences' (`scheduler_core.sentences.duration`: "42 s", "10 min",
"2.5 h"), whose words the events and `qm explain`'s reasons carry, with days from three days on
("3.5 days", where the engine would say "84.0 h"), and each figure in the unit it rounds to below
the next ("2.0 h" of 1 h 59 min 40 s, where the engine says "120 min"). Until 7 Dec qm said its own: "3h ago" beside the
job page's "3.0 h ago", "2h29m" beside "2.5 h", "10m" beside "10 min".

A span a person set (a runtime limit) is said exactly instead (span_text); a table's elapsed
column in qm (`AGE`, a node's heartbeat) is cut to its two largest units ("1d2h"), as Slurm's
squeue TIME is, to keep the column narrow.
"""

from __future__ import annotations


def distance_words(seconds: float) -> str:
    """`seconds` (none below zero: a negative distance is said as none) as the pages and qm say
    it: seconds below two minutes, minutes below two hours, hours to a tenth below three days,
    then days to a tenth. The unit is the one the rounded figure is below the next unit in: 1 h
    59 min 40 s is "2.0 h", not "120 min" (the page said "120 min" of it, and "120 s" of 119.6 s)."""
    seconds = max(0.0, float(seconds))
    if round(seconds) < 120:
        return f"{round(seconds)} s"
    if round(seconds / 60) < 120:
        return f"{round(seconds / 60)} min"
    if round(seconds / 3600, 1) < 72:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"
