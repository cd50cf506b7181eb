"""`qm list` as finance said "No jobs pending or running (use --all for finished ones)." while the
fleet was full of them (the overview said 9 running): finance reads costs, and the API shows it
no job. `qm list` now says so, and where its numbers are; a member with an empty queue is told
as before."""

from __future__ import annotations

import pytest

from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_finance_is_told_it_sees_no_jobs_not_that_there_are_none(qm, fleet) -> None:
    f.make_job(fleet.ml)
    assert qm("login", "--username", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("list")

    assert r.code == 0, r.err
    assert "No jobs pending or running" not in r.out
    assert "finance" in r.out.lower() and "qm showback" in r.out


def test_a_member_with_nothing_running_is_told_so(alice_qm) -> None:
    r = alice_qm("list")

    assert r.out.strip() == "No jobs pending or running (use --all for finished ones)."
