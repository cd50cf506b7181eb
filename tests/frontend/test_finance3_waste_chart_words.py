"""Finance QA, round 3 (2 Dec): grouped by project or priority class, the showback's waste chart
was titled "Preemption waste and idle reserved quota" and, empty, said "Preemption waste per
priority class appear here": idle reserved quota is per team, so those groupings chart
preemption waste only; the title and the sentence now say so, in grammar. The table headed its
first column "Priorityclass"; it says "Priority class"."""

from __future__ import annotations

from typing import Any

import pytest

from frontend import figures

pytestmark = pytest.mark.django_db


def test_the_waste_chart_names_only_what_it_charts() -> None:
    team = figures.waste([], "team", True)
    project = figures.waste([], "priority class", False)

    assert team.title == "Preemption waste and idle reserved quota"
    assert team.empty.endswith("Preemption waste and idle reserved quota per team appear here.")
    assert project.title == "Preemption waste"
    assert project.empty.endswith("Preemption waste per priority class appears here.")


def test_the_table_heads_its_first_column_as_people_say_the_grouping(client_for: Any) -> None:
    # It read "Priorityclass" (the parameter's name with its underscore cut).
    for group_by, heading in (("priority_class", "Priority class"), ("project", "Project"), ("team", "Team")):
        html = client_for("finn").get(f"/showback/?window=24h&group_by={group_by}").content.decode()
        table = html[html.index('id="showback-table"'):html.index("</thead>")]
        assert f'<th scope="col">{heading}</th>' in table, table[:300]


def test_an_empty_waste_chart_does_not_say_nothing_was_lost_beside_lost_gpu_hours(client_for: Any) -> None:
    """Found on the demo (5 Dec), by project: the table's language/eval read "Preemption waste
    $0.00 (< 0.01 GPU-h)" and the chart beside it "Nothing was wasted in this window.". Work was
    lost; it cost less than half a cent."""
    from decimal import Decimal

    def row(name: str, lost: float) -> dict[str, Any]:
        return {"name": name, "is_total": False, "is_idle": False, "preemption_waste_usd": Decimal("0.00"),
                "idle_reserved_usd": None, "lost_gpu_hours": lost}

    chart = figures.waste([row("language/eval", 0.0031), row("vision/detector", 0.0)], "project", False)
    assert chart.empty is not None and "Nothing was wasted" not in chart.empty
    assert chart.empty.startswith("Work lost to preemptions and requeues in this window, less than 0.01 GPU-hours, "
                                  "came to $0.00 to the cent"), chart.empty
    unpriced = figures.waste([row("vision/detector", 2.5)], "project", False)
    assert unpriced.empty.startswith("Work lost to preemptions and requeues in this window, 2.50 GPU-hours, "
                                     "came to $0.00 to the cent"), unpriced.empty
    # nothing lost at all: as before
    assert figures.waste([row("vision/detector", 0.0)], "project", False).empty.startswith("Nothing was wasted")
