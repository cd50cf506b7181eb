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


@pytest.mark.parametrize("text,seconds", [
    ("1.5h", 5400), ("0.25h", 900), ("1.5d", 129600), ("2.5m", 150), ("1d0.5h", 88200), ("1.5H", 5400),
    ("0.0002h", 1),
])
def test_a_decimal_amount_of_a_unit_is_taken_as_the_forms_hours_are(text, seconds) -> None:
    """The submit form's *Runtime limit (hours)* takes 1.5 (rounded to whole seconds, as qm.js
    sends it); `qm submit --time 1.5h` was refused ("not a duration")."""
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("bare", "unit"), [(60, "minutes"), (1, "seconds")])
def test_a_decimal_without_its_unit_is_refused_naming_the_bare_unit(bare, unit) -> None:
    """`--time 1.5` typed as the form's hours would be 90 seconds: the unit is asked for."""
    with pytest.raises(ValueError) as refused:
        parse_duration("1.5", bare)
    assert str(refused.value) == (f"'1.5' is not a duration: a number alone is whole {unit}; give a decimal its unit, "
                                  "e.g. 1.5h")
