"""How far off a time is, in one place: how long ago something happened ("18 min ago") and how far
an ETA is ("in 10 min"), as the pages say it (the `duration`, `age`, `until` and `eta_until`
template filters) and as `qm` says it (`output.human_distance`, `output.ago`: `qm list`'s START,
`qm explain`'s latest and likely start and first ETA, `qm status`'s last checkpoint). `qm` imports
no Django, and neither does this module.

The rule is the engine's (`scheduler_core.sentences.distance`, its one home): the words of its
sentences' `duration` ("42 s", "10 min", "2.5 h"), which the events and `qm explain`'s reasons
carry, with days from three days on ("3.5 days", where the engine's sentences say "84.0 h"), and
each figure in the unit it rounds to below the next ("2.0 h" of 1 h 59 min 40 s; until 7 Dec the
engine said "120 min" of it while the pages said "2.0 h"). Until 7 Dec qm said its own: "3h ago" beside the
job page's "3.0 h ago", "2h29m" beside "2.5 h", "10m" beside "10 min".

A span a person set (a runtime limit) is said exactly instead (span_text); a table's elapsed
column in qm (`AGE`, a node's heartbeat) is cut to its two largest units ("1d2h"), as Slurm's
squeue TIME is, to keep the column narrow.
"""

from __future__ import annotations

from scheduler_core.sentences import distance

#: The engine's rule, one home (scheduler_core.sentences.distance): the engine cannot import the
#: control plane, so the words live there and the pages and qm say them through this name.
distance_words = distance
