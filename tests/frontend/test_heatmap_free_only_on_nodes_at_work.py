"""The heat map's number at the end of a row counts free GPUs only on a node that takes work.

Operator review, 7 Dec: a cordoned node and a node in a maintenance window, each idle, ended their
grey rows with "8", read as 8 free GPUs, while `qm sinfo` said FREE 0 and AWAY 16 for the pool,
the Nodes page "0 free on ready nodes" and the tile "16 away". Such a row now ends with "–": its
idle GPUs are away, not free."""

from __future__ import annotations

from frontend import figures
from frontend.heatmap import NodeRow, Slot

HELD = Slot("vision", 7, team_id=1)


def row(name: str, used: int, state: str = "ready", in_maintenance: bool = False) -> NodeRow:
    return NodeRow(id=len(name), name=name, pool="h100", leaf_switch="leaf-1", spine="spine-1", state=state,
                   gpu_type="H100-80GB", capacity_tier="reserved", slots=tuple([HELD] * used + [None] * (8 - used)),
                   in_maintenance=in_maintenance)


def test_operator_rows_of_nodes_that_take_no_work_count_no_free_gpus() -> None:
    rows = [row("ready-3", 5), row("cordoned", 0, "cordoned"), row("draining", 4, "draining"),
            row("window", 0, in_maintenance=True), row("down", 0, "down"), row("full", 8)]
    chart = figures.fleet_heatmap(rows)

    ends = chart.figure["data"][1]["text"]
    assert ends == ["3", "–", "–", "–", "–", "0"]   # the idle rows said 8, 4, 8 and 8
    assert sum(int(n) for n in ends if n != "–") == chart.notes["free_gpus"] == 3
    assert "away" in chart.caption
