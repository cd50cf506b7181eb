"""`qm showback`: a group whose jobs report useful tokens but kept none in the window (a serving
job still loading its model, or tokens lost to a preemption) read '-' under $/1M TOKENS and 0.00
under COST W/O TOKENS $, while the note under the table said its cost was under COST W/O
TOKENS $ (finance walk, 8 Dec). qm now says that it is token-reporting cost that kept no tokens."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from tests.controlplane.cli.showback_table import table_row


def test_qm_showback_says_a_groups_token_jobs_kept_no_tokens(qm, fleet) -> None:
    from controlplane.services import accounting
    from tests.controlplane.accounting.builders import hold, report, running_job

    start = accounting.floor_to(timezone.now(), accounting.HOUR) - timedelta(hours=3)
    job = running_job(fleet.ml, gpus=8, started_at=start, priority_class=fleet.research)
    allocation = hold(job, [(fleet.nodes[1], 8)], start, start + timedelta(hours=1))
    report(allocation, fleet.nodes[1], start, start + timedelta(minutes=30), tokens_per_s=0, steps_per_s=0)
    report(allocation, fleet.nodes[1], start + timedelta(minutes=30), start + timedelta(hours=1), tokens_per_s=1000,
           steps_per_s=0)
    accounting.catch_up(timezone.now())
    window = f"{accounting.iso(start)},{accounting.iso(start + timedelta(minutes=30))}"
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--window", window)

    assert r.code == 0, r.err
    row = table_row(r.out, "ml")
    assert row["$/1M TOKENS"] == "-" and row["COST W/O TOKENS $"] == "0.00" and row["COST $"] != "0.00", r.out
    said = [line for line in r.out.splitlines() if "ml" in line and "TOKENS" in line and not line.startswith("ml ")]
    assert said and not any("no useful tokens reported (ml" in line for line in said), r.out
    assert any("no useful tokens kept in this period by jobs that report them (ml $10.00, TOTAL $10.00)" in line
               for line in said), r.out
