"""`qm showback`'s GPU-hour columns add up to its TOTAL row, as the page's do (finance review,
7 Dec): each cell was the API's figure rounded on its own, so two teams that each held a GPU for
1.00505 GPU-hours read 1.01 and 1.01 above a TOTAL of 2.01. Now the cells are the API's `shown`,
the page's figures: rounded cumulatively to two places (`showback.shown_figures`)."""

from __future__ import annotations

from decimal import Decimal

from tests.controlplane.accounting.builders import both_teams_held_one_gpu
from tests.controlplane.cli.showback_table import table_row


def test_qm_showbacks_gpu_hours_add_up_to_total(qm, fleet) -> None:
    window = both_teams_held_one_gpu(fleet)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--window", window)

    assert r.code == 0, r.err
    ml, vision, total = (table_row(r.out, name) for name in ("ml", "vision", "TOTAL"))
    assert total["GPU-H ALLOC"] == "2.01", r.out
    assert sorted([ml["GPU-H ALLOC"], vision["GPU-H ALLOC"]]) == ["1.00", "1.01"], r.out
    for column in ("GPU-H ALLOC", "GPU-H ACTIVE", "GPU-H PRODUCTIVE"):
        assert Decimal(ml[column]) + Decimal(vision[column]) == Decimal(total[column]), column
