"""sbatch --time's forms with days: `D-HH`, `D-HH:MM`, `D-HH:MM:SS`. After the day the next
number is hours: `qm submit -t 1-12:30` gave a limit of a day and 12 minutes 30 seconds (read
as D-MM:SS) instead of 36 h 30 min, and `-t 2-12` (two and a half days) was refused."""

from __future__ import annotations

import pytest

from controlplane.cli.output import parse_duration

H = 3600


@pytest.mark.parametrize(("text", "seconds"), [
    ("1-12:30", 36 * H + 30 * 60), ("2-12", 60 * H), ("0-4", 4 * H), ("1-02:00:00", 26 * H),
    ("1-2:3:4", 26 * H + 3 * 60 + 4), ("30:00", 1800), ("1:30:00", 90 * 60), ("04:00:00", 4 * H),
])
def test_slurm_clock_forms(text, seconds) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["1-", "-1", "1-2:3:4:5", "1:2:3:4", "12:", "1--2"])
def test_malformed_clocks_are_refused(text) -> None:
    with pytest.raises(ValueError, match=r"is not a duration: use e.g. 4h, 1.5h, 90m, 1d12h, 04:00:00 or 1-12:00"):
        parse_duration(text)
