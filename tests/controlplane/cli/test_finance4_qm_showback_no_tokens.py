"""`qm showback`: a group whose jobs reported no useful tokens (evaluation counted in steps)
showed '-' under $/1M TOKENS with nothing saying why (finance audit, 5 Dec); the page explains it
under its table. qm now says plainly that no tokens were reported there, so there is no price
per token (neither $0 nor infinite), and that its cost is under COST W/O TOKENS $."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone


def test_qm_showback_says_why_a_group_has_no_price_per_token(qm, fleet) -> None:
    from controlplane.models import Allocation
    from controlplane.services import accounting
    from tests.controlplane.accounting.builders import hold, report, running_job

    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=8, started_at=start, priority_class=fleet.research)
    hold(job, [(fleet.nodes[1], 8)], start, start + timedelta(hours=1))
    report(Allocation.objects.get(job=job), fleet.nodes[1], start, start + timedelta(hours=1), tokens_per_s=0.0)
    accounting.catch_up(now)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0
    ml = qm("showback", "--by", "team", "--window", "1d", "--json").json()["data"][0]["ml"]
    assert ml["usdPerMillionTokens"] is None and ml["costWithoutTokens"] > 0

    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    header, *lines = r.out.splitlines()[1:]
    columns = re.split(r"\s{2,}", header.strip())
    row = next(re.split(r"\s{2,}", line.strip()) for line in lines if line.startswith("ml "))
    assert row[columns.index("$/1M TOKENS")] == "-"
    note = [line for line in r.out.splitlines() if line.startswith("$/1M TOKENS '-':")]
    assert len(note) == 1, r.out
    assert "no useful tokens reported (ml" in note[0] and "COST W/O TOKENS $" in note[0], note[0]


def test_qm_showback_says_nothing_of_tokens_when_every_group_reported_them(qm, fleet) -> None:
    from controlplane.models import Allocation
    from controlplane.services import accounting
    from tests.controlplane.accounting.builders import hold, report, running_job

    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=8, started_at=start, priority_class=fleet.research)
    hold(job, [(fleet.nodes[1], 8)], start, start + timedelta(hours=1))
    report(Allocation.objects.get(job=job), fleet.nodes[1], start, start + timedelta(hours=1), tokens_per_s=1000.0)
    accounting.catch_up(now)
    assert qm("login", "-u", "alice", "--password-stdin", stdin="alice\n").code == 0

    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    assert "$/1M TOKENS '-'" not in r.out, r.out
