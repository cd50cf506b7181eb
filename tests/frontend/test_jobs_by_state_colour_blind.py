"""The Teams page's *Jobs by state* bars tell apart, without colour, states whose colours a
colour-blind reader sees alike.

The bars take the badges' colours (`STATE_COLOURS`), stacked per team, and a state absent from
one team's bar moves the others: where a bar lies in the stack says nothing, its colour alone
named its state. Simulated for deuteranopia and protanopia (Machado, Oliveira and Fernandes 2009,
full severity), running beside failed or timed out and pending beside preempting came within a
CIE76 ΔE of 20, and timed out beside unschedulable at 4.3 (protanopia): one brown and one grey
to half the readers' eyes, as were Plotly's default green and red, 7.3, which the queue chart
dropped. Until 8 Dec every bar was plain; a state whose colour comes that close to another's is
now hatched in its own pattern (`figures.STATE_PATTERNS`)."""

from __future__ import annotations

import math
from itertools import combinations

from controlplane.choices import JobState
from frontend import figures

#: Machado et al. (2009), severity 1.0, on linear RGB.
SIMULATIONS = {
    "deuteranopia": ((0.367322, 0.860646, -0.227968), (0.280085, 0.672501, 0.047413), (-0.011820, 0.042940, 0.968881)),
    "protanopia": ((0.152286, 1.052583, -0.204868), (0.114503, 0.786281, 0.099216), (-0.003882, -0.048116, 1.051998)),
}
#: Two colours nearer than this (CIE76 ΔE) are read as one at a glance.
ALIKE = 20.0


def _linear(c: float) -> float:
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _lab_as_seen(colour: str, matrix: tuple[tuple[float, ...], ...]) -> tuple[float, float, float]:
    rgb = [_linear(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5)]
    r, g, b = (min(1.0, max(0.0, sum(m * v for m, v in zip(row, rgb, strict=True)))) for row in matrix)
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def _every_state_bar() -> list[dict]:
    rows = [{"team": "vision", "state": state.value, "n": 1} for state in JobState]
    return figures.jobs_by_state(rows).figure["data"]


def test_states_alike_to_a_colour_blind_reader_differ_in_pattern() -> None:
    bars = _every_state_bar()
    assert len(bars) == len(JobState)
    alike = []
    for a, b in combinations(bars, 2):
        for name, matrix in SIMULATIONS.items():
            distance = math.dist(_lab_as_seen(a["marker"]["color"], matrix), _lab_as_seen(b["marker"]["color"], matrix))
            if distance < ALIKE:
                alike.append((a["name"], b["name"], name, round(distance, 1)))
                pattern_a = a["marker"].get("pattern", {}).get("shape", "")
                pattern_b = b["marker"].get("pattern", {}).get("shape", "")
                assert pattern_a != pattern_b, (a["name"], b["name"], name, round(distance, 1))
    assert alike, "the premise: some states' colours are alike to a colour-blind reader"


def test_the_common_states_stay_plain_and_the_patterns_are_plotlys() -> None:
    shapes = {bar["name"]: bar["marker"].get("pattern", {}).get("shape", "") for bar in _every_state_bar()}
    assert shapes[JobState.RUNNING.label] == shapes[JobState.PENDING.label] == shapes[JobState.SUCCEEDED.label] == ""
    assert set(shapes.values()) <= {"", "/", "\\", "x", "-", "|", "+", "."}
