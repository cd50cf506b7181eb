"""The pages and qm say how far off a time is (distance_words) in the engine's words
(scheduler_core.sentences.duration), the one rule, so that an event's "in 2.0 h" and the page's
"in 2.0 h" beside it agree at every edge: until 7 Dec the engine said "120 min" of 7170 to
7199 s and "120 s" of 119.5 to 119.99 s, where the page and qm said "2.0 h" and "2 min"."""

from __future__ import annotations

from controlplane.services.distance_text import distance_words
from scheduler_core.sentences import duration

EDGES = [0, 1, 59.5, 119.4, 119.5, 119.6, 120, 3599, 3600, 7169, 7169.5, 7170, 7199.9, 7200, 9000,
         71.9 * 3600, 71.94 * 3600]


def test_below_three_days_the_pages_and_the_engine_say_a_span_alike() -> None:
    for seconds in EDGES + [s / 10 for s in range(0, 2_588_000, 997)]:
        assert distance_words(seconds) == duration(seconds), seconds


def test_from_three_days_on_the_page_says_days() -> None:
    assert distance_words(71.95 * 3600) == "3.0 days"
    assert distance_words(5 * 86400) == "5.0 days"
