"""`qm quotas`: a researcher asks how much of its quota its team holds and how much it borrows,
as `sshare` or `kubectl get clusterqueue` answer it; before, only the admin UI and the teams page
said so."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.slow


def test_a_member_reads_its_teams_quota_holdings_and_borrowing(alice_qm, fleet) -> None:
    now = timezone.now()
    for node in fleet.nodes[0:3]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)

    r = alice_qm("quotas")

    assert r.code == 0, r.err
    lines = r.out.strip().splitlines()
    assert lines[0].split() == ["TEAM", "COHORT", "GPU", "TYPE", "NOMINAL", "MAY", "BORROW", "MAY", "LEND",
                                "HELD", "NOW", "BORROWED", "LENT", "NOW"]
    # unset limits are unlimited: "none" read as "may lend none" while the team lent GPUs
    assert [line.split() for line in lines[1:]] == [
        ["ml", "all", "H100-80GB", "16", "no", "limit", "no", "limit", "24", "8", "0"]]


def test_an_admin_reads_what_each_team_lends(qm, fleet) -> None:
    now = timezone.now()
    for node in fleet.nodes[0:3]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)
    assert qm("login", "--username", "root", "--password-stdin", stdin="root\n").code == 0
    rows = {line.split()[0]: line.split() for line in qm("quotas").out.strip().splitlines()[1:]}
    # vision's idle nominal carries ml's 8 borrowed GPUs
    assert rows["vision"][-1] == "8" and rows["ml"][-1] == "0"


def test_an_admin_reads_one_team_with_team(qm, fleet) -> None:
    assert qm("login", "--username", "root", "--password-stdin", stdin="root\n").code == 0
    everyone = qm("quotas")
    assert {line.split()[0] for line in everyone.out.strip().splitlines()[1:]} == {"ml", "vision"}
    one = qm("quotas", "--team", "vision", "--json").json()
    assert [(q["team"], q["held_gpus"], q["borrowed_gpus"]) for q in one["results"]] == [("vision", 0, 0)]


def test_a_lent_share_that_is_no_whole_gpu_is_marked_and_said_as_a_share(qm, fleet) -> None:
    """GPUs are lent whole, but not by one team: ml's 8 borrowed GPUs run on the idle guarantees of
    three teams of its cohort together, and the accounting splits them in proportion to what each
    may lend (8 / 3 each). The operator journey (2 Dec) read "LENT NOW 2.7" as GPUs lent; a share
    that is no whole GPU is now marked and said to be a share, and the shares add up to the 8."""
    from controlplane.models import Quota
    from tests.controlplane import factories as f

    Quota.objects.filter(team=fleet.ml).update(nominal_gpus=2)
    Quota.objects.filter(team=fleet.vision).update(nominal_gpus=10)
    for name in ("audio", "speech"):
        f.make_quota(f.make_team(name, cohort=fleet.ml.cohort, default_priority_class=fleet.research), fleet.h100, 10)
    now = timezone.now()
    hold(running_job(fleet.ml, gpus=10, started_at=now), [(fleet.nodes[0], 8), (fleet.nodes[1], 2)], now)
    assert qm("login", "--username", "root", "--password-stdin", stdin="root\n").code == 0

    r = qm("quotas")

    assert r.code == 0, r.err
    table, _, notes = r.out.strip().partition("\n\n")
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:]}
    assert rows["ml"][-3:] == ["10", "8", "0"]
    assert [rows[t][-1] for t in ("audio", "speech", "vision")] == ["≈2.7", "≈2.7", "≈2.7"]
    assert "≈: a share, not a count of GPUs" in notes
    assert "in proportion to what each may lend" in notes
    # every team's share whole: no mark, no note
    Quota.objects.filter(team__name__in=["audio", "speech"]).delete()
    Quota.objects.filter(team=fleet.vision).update(nominal_gpus=16)
    r = qm("quotas")
    assert "≈" not in r.out


def test_a_team_in_no_cohort_may_borrow_and_lend_none(alice_qm, fleet) -> None:
    """It said "no limit" (its empty limits) while its jobs waited "can borrow 0 more"."""
    from controlplane.models import Quota

    Quota.objects.filter(team=fleet.ml).update(lending_limit=4)
    fleet.ml.cohort = None
    fleet.ml.save()

    r = alice_qm("quotas")

    assert r.code == 0, r.err
    row = re.split(r"\s{2,}", r.out.strip().splitlines()[1].strip())
    assert row[:6] == ["ml", "-", "H100-80GB", "16", "none (no cohort)", "none (no cohort)"], row


def test_a_lender_beyond_its_lending_limit_is_said_to_be_as_the_pages_say_it(qm, fleet) -> None:
    """An admin lowered vision's lending limit to 3 under ml, which runs on 8 of its GPUs: the
    borrowers keep them, so vision lends 8, 5 over its limit. The admin's quota list and the teams
    page said so (services/quota_text.py); `qm quotas` printed LENT NOW 8 beside MAY LEND 3,
    unexplained, and at 80 columns, MAY LEND left out, the 8 alone. Wide, the cell reads as the
    admin's quota list; at 80 columns the cell stays a figure and a note under the table says it."""
    from controlplane.models import Quota

    now = timezone.now()
    for node in fleet.nodes[0:3]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)
    Quota.objects.filter(team=fleet.vision).update(lending_limit=3)
    assert qm("login", "--username", "root", "--password-stdin", stdin="root\n").code == 0

    wide = qm("quotas")

    assert wide.code == 0, wide.err
    rows = {re.split(r"\s{2,}", line.strip())[0]: re.split(r"\s{2,}", line.strip())
            for line in wide.out.strip().split("\n\n")[0].splitlines()[1:]}
    assert rows["vision"][-1] == "8 (5 over its lending limit 3)", rows["vision"]
    assert rows["ml"][-1] == "0"

    narrow = qm("quotas", extra_env={"COLUMNS": "80"})

    assert narrow.code == 0, narrow.err
    assert max(len(line) for line in narrow.out.splitlines()) <= 80, narrow.out
    table, _, notes = narrow.out.strip().partition("\n\n")
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:]}
    assert rows["vision"][-1] == "8" and rows["ml"][-1] == "0"
    said = " ".join(notes.split())
    assert "vision H100-80GB LENT NOW 8 (5 over its lending limit 3)" in said, notes
    assert "ml H100-80GB" not in said
    # within its limit again: no note
    Quota.objects.filter(team=fleet.vision).update(lending_limit=None)
    assert "over its lending limit" not in qm("quotas", extra_env={"COLUMNS": "80"}).out


def test_a_borrower_beyond_its_borrowing_limit_is_said_to_be_as_the_pages_say_it(qm, fleet) -> None:
    """ml runs 24 GPUs on a nominal of 16, 8 borrowed; an admin then set its borrowing limit to 3.
    It keeps what it runs, so it borrows 5 beyond the limit. The admin's quota list and the teams
    page said so; `qm quotas` printed BORROWED 8 beside MAY BORROW 3, unexplained. Wide, the cell
    reads as the admin's list; at 80 columns a note under the table says it, as for lending."""
    from controlplane.models import Quota

    now = timezone.now()
    for node in fleet.nodes[0:3]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)
    Quota.objects.filter(team=fleet.ml).update(borrowing_limit=3)
    assert qm("login", "--username", "root", "--password-stdin", stdin="root\n").code == 0

    wide = qm("quotas")

    assert wide.code == 0, wide.err
    rows = {re.split(r"\s{2,}", line.strip())[0]: re.split(r"\s{2,}", line.strip())
            for line in wide.out.strip().split("\n\n")[0].splitlines()[1:]}
    assert rows["ml"][-2] == "8 (5 over its borrowing limit 3)", rows["ml"]
    assert rows["vision"][-2] == "0"

    narrow = qm("quotas", extra_env={"COLUMNS": "80"})

    assert narrow.code == 0, narrow.err
    assert max(len(line) for line in narrow.out.splitlines()) <= 80, narrow.out
    table, _, notes = narrow.out.strip().partition("\n\n")
    rows = {line.split()[0]: line.split() for line in table.splitlines()[1:]}
    assert rows["ml"][-2] == "8"
    said = " ".join(notes.split())
    assert "ml H100-80GB BORROWED 8 (5 over its borrowing limit 3)" in said, notes
    assert "vision H100-80GB" not in said
    Quota.objects.filter(team=fleet.ml).update(borrowing_limit=None)
    assert "over its borrowing limit" not in qm("quotas", extra_env={"COLUMNS": "80"}).out
