"""Finance QA, round 3 (2 Dec): `?window=2026-11-01T00:00:00Z,2026-11-01T00:00:00Z` (the same
instant twice, or one instant in two offsets) was refused as a window that "ends before it
starts". It is refused as covering no time; a window that does end before it starts keeps its
words."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controlplane.services import showback

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)


@pytest.mark.parametrize("text", ["2026-11-01T00:00:00Z,2026-11-01T00:00:00Z",
                                  "2026-11-01T05:00:00+05:00,2026-11-01T00:00:00Z"])
def test_a_window_of_one_instant_covers_no_time(text: str) -> None:
    with pytest.raises(showback.AccountingQueryError) as refused:
        showback.parse_window(text, NOW)
    assert refused.value.field == "window"
    assert "covers no time" in refused.value.message and "before" not in refused.value.message


def test_a_window_ending_before_it_starts_still_says_so() -> None:
    with pytest.raises(showback.AccountingQueryError) as refused:
        showback.parse_window("2026-11-02T00:00:00Z,2026-11-01T00:00:00Z", NOW)
    assert refused.value.field == "window" and "before it starts" in refused.value.message
