"""The Nodes page's *GPUs by pool and node state* bars tell apart, without colour, node states
whose colours a colour-blind reader sees alike.

The bars take the badges' colours (`STATE_COLOURS`, and the maintenance badge's orange), stacked
per pool, so where a bar lies in the stack says nothing and its colour alone named its state.
Simulated for deuteranopia and protanopia (tests/frontend/colour_vision.py, the method of the
Teams page's *Jobs by state* test), ready came within a CIE76 ΔE of 20 of in maintenance (17.4)
and of down (17.0), in maintenance of suspect (12.6) and draining of quarantined (14.8). Until
8 Dec every bar was plain; in maintenance, down and quarantined are now hatched, each in its own
pattern (`figures.NODE_STATE_PATTERNS`), as the Teams page's states are."""

from __future__ import annotations

from controlplane.choices import NodeState
from frontend import figures
from tests.frontend.colour_vision import alike_pairs, pattern_of


def _every_state_bar() -> list[dict]:
    states = [state.value for state in NodeState] + [figures.IN_MAINTENANCE]
    rows = [{"pool": "a100", "state": state, "gpus": 8} for state in states]
    return figures.nodes_by_state(rows).figure["data"]


def test_node_states_alike_to_a_colour_blind_reader_differ_in_pattern() -> None:
    bars = _every_state_bar()
    assert len(bars) == len(NodeState) + 1
    alike = alike_pairs(bars)
    for a, b, eyes, distance in alike:
        assert pattern_of(a) != pattern_of(b), (a["name"], b["name"], eyes, distance)
    assert {(a["name"], b["name"]) for a, b, _, _ in alike} >= {("Ready", "Down"), ("Draining", "Quarantined")}, \
        "the premise: some node states' colours are alike to a colour-blind reader"


def test_ready_stays_plain_and_the_patterns_are_plotlys_drawn_as_the_teams_pages() -> None:
    bars = _every_state_bar()
    shapes = {bar["name"]: pattern_of(bar) for bar in bars}
    assert shapes[NodeState.READY.label] == ""
    assert set(shapes.values()) <= {"", "/", "\\", "x", "-", "|", "+", "."}
    # The same hatching as the Teams page's bars (white over the colour), not a look of its own.
    teams = figures.jobs_by_state([{"team": "vision", "state": "failed", "n": 1}]).figure["data"][0]["marker"]["pattern"]
    for bar in bars:
        if pattern_of(bar):
            assert {k: v for k, v in bar["marker"]["pattern"].items() if k != "shape"} == \
                {k: v for k, v in teams.items() if k != "shape"}
