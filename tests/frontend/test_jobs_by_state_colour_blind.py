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

from controlplane.choices import JobState
from frontend import figures
from tests.frontend.colour_vision import alike_pairs, pattern_of


def _every_state_bar() -> list[dict]:
    rows = [{"team": "vision", "state": state.value, "n": 1} for state in JobState]
    return figures.jobs_by_state(rows).figure["data"]


def test_states_alike_to_a_colour_blind_reader_differ_in_pattern() -> None:
    bars = _every_state_bar()
    assert len(bars) == len(JobState)
    alike = alike_pairs(bars)
    for a, b, eyes, distance in alike:
        assert pattern_of(a) != pattern_of(b), (a["name"], b["name"], eyes, distance)
    assert alike, "the premise: some states' colours are alike to a colour-blind reader"


def test_the_common_states_stay_plain_and_the_patterns_are_plotlys() -> None:
    shapes = {bar["name"]: pattern_of(bar) for bar in _every_state_bar()}
    assert shapes[JobState.RUNNING.label] == shapes[JobState.PENDING.label] == shapes[JobState.SUCCEEDED.label] == ""
    assert set(shapes.values()) <= {"", "/", "\\", "x", "-", "|", "+", "."}
