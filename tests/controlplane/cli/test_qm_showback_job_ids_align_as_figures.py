"""`qm showback --by job` right-aligns its job ids, as `qm list` and `qm history` do theirs and
as every figure column is: the `__idle__` and TOTAL rows share the column, and until 7 Dec their
words made the whole column read as text, so the ids were left-aligned (job 7 above job 12 read
`7 ` over `12`). The two labels stay at the left edge, as TOTAL is in every grouping."""

from __future__ import annotations

import re

import pytest

from tests.controlplane.accounting.builders import both_teams_held_one_gpu

pytestmark = pytest.mark.slow


def test_showback_by_job_right_aligns_the_ids_and_keeps_its_labels_left(qm, fleet) -> None:
    window = both_teams_held_one_gpu(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "job", "--window", window)

    assert r.code == 0, r.err
    lines = r.out.splitlines()
    header = lines[1]
    assert header.startswith("JOB ")
    column = re.search(r"JOB\s+(?=\S)", header).end() - 2  # the JOB column's width, before the gap
    rows = [line for line in lines[2:] if re.match(r"\s*\d+\s{2}", line)]
    assert len(rows) >= 2, r.out
    for row in rows:
        # each id ends where the column ends, as a figure does
        assert row[column - 1].isdigit() and row[column:column + 2] == "  ", (row, r.out)
    assert any(line.startswith("TOTAL ") for line in lines), r.out
