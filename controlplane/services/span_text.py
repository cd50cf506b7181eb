"""How a span of time set by a person is said, in one place: a job's runtime limit (and its
checkpoint interval) in `qm submit`, `qm status` and `qm sprio`, the change sentences
(`runtime limit 4 h → 2 h`), the job page, its queue row, the submit event, and the engine's own
sentences (a kill at the limit, a job behind the head, a job kept off a node in maintenance).
The words are the engine's (`scheduler_core.sentences.span_words`, since the engine may import
nothing from the control plane); this module names them for the control plane. `qm` imports no
Django, and neither does this module (nor the engine).

Said exactly, as it is typed (`--time 1h30m`), in the units a researcher reads: `2 h`,
`1 h 30 min`, `45 min`, `1 d 12 h`, `1 min 30 s`. Until 7 Dec a runtime limit was
spelled six ways: `limit 2h` (qm), `2 h → 3 h` (the change sentence), `runtime limit 2.0 h`
and `60 min` for an hour (the events and the engine's kill), `7200 s` (a job behind the head),
`2.0 h` (the job page and a job kept off a node in maintenance); and `2.5 h` rounded a limit of
2 h 29 min.
"""

from __future__ import annotations

from scheduler_core.sentences import span_words

__all__ = ["span_words"]
