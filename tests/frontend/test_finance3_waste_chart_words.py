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
        assert f"<th>{heading}</th>" in table, table[:300]
