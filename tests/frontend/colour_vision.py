"""How alike two chart colours look to a colour-blind reader, for the tests that check state bars
tell apart, without colour, the states such a reader sees alike.

Deuteranopia and protanopia are simulated after Machado, Oliveira and Fernandes (2009), full
severity, and colours compared by CIE76 ΔE in CIELAB (D65)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from itertools import combinations
from typing import Any

#: Machado et al. (2009), severity 1.0, on linear RGB.
SIMULATIONS = {
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
}
#: Two colours nearer than this (CIE76 ΔE) are read as one at a glance.
ALIKE = 20.0


def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def lab_as_seen(colour: str, matrix: tuple[tuple[float, ...], ...]) -> tuple[float, float, float]:
    rgb = [_linear(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5)]
    r, g, b = (min(1.0, max(0.0, sum(m * v for m, v in zip(row, rgb, strict=True)))) for row in matrix)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def pattern_of(bar: Mapping[str, Any]) -> str:
    """A bar trace's hatching shape, "" when plain."""
    return str(bar["marker"].get("pattern", {}).get("shape", ""))


def alike_pairs(bars: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], Mapping[str, Any], str, float]]:
    """Every two bar traces whose colours a deuteranope or protanope sees within ALIKE, with whose
    eyes and the ΔE."""
    pairs = []
    for a, b in combinations(list(bars), 2):
        for name, matrix in SIMULATIONS.items():
            distance = math.dist(lab_as_seen(a["marker"]["color"], matrix), lab_as_seen(b["marker"]["color"], matrix))
            if distance < ALIKE:
                pairs.append((a, b, name, round(distance, 1)))
    return pairs
