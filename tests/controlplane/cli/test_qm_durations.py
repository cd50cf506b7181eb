"""Durations as `qm submit --time` takes them."""

from __future__ import annotations

import pytest

from controlplane.cli.output import human_duration, parse_duration


@pytest.mark.parametrize("text,seconds", [
    ("4h", 14400), ("90m", 5400), ("1d12h", 129600), ("45s", 45), ("3600", 3600), ("2w", 1209600),
    ("04:00:00", 14400), ("30:00", 1800), ("1-02:00:00", 93600),
], ids=["hours", "minutes", "days_and_hours", "seconds", "bare_seconds", "weeks", "slurm_clock", "minutes_clock",
        "slurm_days"])
def test_durations_parse_to_seconds(text, seconds) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["soon", "", "4x", "h4"])
def test_non_durations_are_refused_with_examples(text) -> None:
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration(text)


def test_human_durations_show_the_two_largest_units() -> None:
    assert (human_duration(14400), human_duration(93784), human_duration(42)) == ("4h", "1d2h", "42s")
