"""A state badge's word reads at least 4.5:1 against its colour (WCAG AA for its 12 px type), for
every job and node state: white on the dark colours, dark ink on the light ones. Measured before
6 Dec, white on every badge: pending 2.3:1, suspect 2.5, cancelled and cordoned 3.3, preempting
3.6, succeeded and draining 4.2, running and ready 4.4 (the pages' own measure, colours included
as drawn: tests/frontend/test_pages_accessible_browser.py)."""

from __future__ import annotations

import re

import pytest

from controlplane.choices import STATE_COLOURS
from frontend.templatetags.qm import state_badge

INK = {"badge": "#ffffff", "badge ink-dark": "#1b1f24"}  # qm.css: .badge, .badge.ink-dark


def luminance(colour: str) -> float:
    """WCAG 2's relative luminance of "#rrggbb"."""
    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
    r, g, b = (channel(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("state", [str(s) for s in STATE_COLOURS])
def test_every_state_badge_says_its_word_at_4_5_to_1(state: str) -> None:
    html = str(state_badge(state))
    found = re.search(r'class="([^"]+)" data-state="[^"]+" style="background:(#[0-9a-f]{6})">(\w[^<]*)<', html)
    assert found, html
    classes, colour, words = found.groups()
    assert words.strip(), "a badge says its state in words, not by colour alone"
    assert contrast(INK[classes], colour) >= 4.5, (state, classes, colour, round(contrast(INK[classes], colour), 2))
