"""`qm showback`: a group whose jobs reported no useful tokens (evaluation counted in steps)
showed '-' under $/1M TOKENS with nothing saying why (finance audit, 5 Dec); the page explains it
under its table. qm now says plainly that no tokens were reported there, so there is no price
per token (neither $0 nor infinite), and that its cost is under COST W/O TOKENS $."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from tests.controlplane.cli.showback_table import ml_job_ran, table_row


def test_qm_showback_says_why_a_group_has_no_price_per_token(qm, fleet) -> None:
    now = timezone.now().replace(microsecond=0)
    ml_job_ran(fleet, gpus=8, start=now - timedelta(hours=2), held=timedelta(hours=1), tokens_per_s=0.0,
               rolled_up_to=now)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    ml = qm("showback", "--by", "team", "--window", "1d", "--json").json()["data"][0]["ml"]
    assert ml["usdPerMillionTokens"] is None and ml["costWithoutTokens"] > 0

    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    assert table_row(r.out, "ml")["$/1M TOKENS"] == "-"
    note = [line for line in r.out.splitlines() if line.startswith("$/1M TOKENS '-':")]
    assert len(note) == 1, r.out
    assert "no useful tokens reported (ml" in note[0] and "COST W/O TOKENS $" in note[0], note[0]


def test_qm_showback_says_nothing_of_tokens_when_every_group_reported_them(qm, fleet) -> None:
    now = timezone.now().replace(microsecond=0)
    ml_job_ran(fleet, gpus=8, start=now - timedelta(hours=2), held=timedelta(hours=1), tokens_per_s=1000.0,
               rolled_up_to=now)
    assert qm("login", "-u", "alice", "--password-stdin", stdin="alice\n").code == 0

    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    assert "$/1M TOKENS '-'" not in r.out, r.out
