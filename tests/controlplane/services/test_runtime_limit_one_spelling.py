"""A runtime limit is spelled one way wherever it is said (span_text.span_words): exactly, as
it is typed, in the units a researcher reads, `2 h`, `1 h 30 min`, `45 min`. Until 7 Dec it was
spelled four ways: `qm submit` said `limit 2h`, the change sentence `2 h → 3 h`, the events
`runtime limit 2.0 h` (and `60 min` for an hour), the job page `2.0 h`; `2.5 h` rounded a limit
of 2 h 29 min."""

from __future__ import annotations

import pytest

from controlplane.services.span_text import span_words


@pytest.mark.parametrize(("seconds", "said"), [
    (7200, "2 h"), (3600, "1 h"), (5400, "1 h 30 min"), (2700, "45 min"), (8940, "2 h 29 min"),
    (90, "1 min 30 s"), (45, "45 s"), (0, "0 s"), (6 * 86400, "6 d"), (86400 + 12 * 3600, "1 d 12 h"),
])
def test_a_span_is_said_exactly_in_hours_and_minutes(seconds: int, said: str) -> None:
    assert span_words(seconds) == said
