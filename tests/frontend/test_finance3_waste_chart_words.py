"""Finance QA, round 3 (2 Dec): grouped by project or priority class, the showback's waste chart
was titled "Preemption waste and idle reserved quota" and, empty, said "Preemption waste per
priority class appear here": idle reserved quota is per team, so those groupings chart
preemption waste only; the title and the sentence now say so, in grammar."""

from __future__ import annotations

from frontend import figures


def test_the_waste_chart_names_only_what_it_charts() -> None:
    team = figures.waste([], "team", True)
    project = figures.waste([], "priority class", False)

    assert team.title == "Preemption waste and idle reserved quota"
    assert team.empty.endswith("Preemption waste and idle reserved quota per team appear here.")
    assert project.title == "Preemption waste"
    assert project.empty.endswith("Preemption waste per priority class appears here.")
