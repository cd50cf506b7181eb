"""The pages' GPU-hours: one decimal, but a small non-zero amount never reads as nothing."""

from __future__ import annotations

import pytest

from frontend.templatetags.qm import as_gpu_hours, gpu_hours
from scheduler_core.sentences import gpu_hours as say_gpu_hours


@pytest.mark.parametrize(("value", "shown"), [
    (None, "–"), (0, "0"), (0.004, "< 0.01"), (0.2667, "0.27"), (0.05, "0.05"),
    (1.04, "1.0"), (2.5, "2.5"), (12345.67, "12,345.7"),
])
def test_gpu_hours_keep_small_amounts_visible(value, shown):
    assert as_gpu_hours(value) == shown
    assert gpu_hours(None if value is None else value * 3600) == shown  # the same, from GPU-seconds


@pytest.mark.parametrize("hours", [0, 0.0028, 0.0099, 0.01, 0.2667, 0.999])
def test_below_one_gpu_hour_the_pages_say_what_the_sentences_say(hours):
    # one rule for a small loss: an event's "less than 0.01 GPU-hours" is the page's "< 0.01"
    assert as_gpu_hours(hours) == say_gpu_hours(hours, cell=True)
