"""`qm showback` over a period reaching back before the accounting began says when it began:
the figures count nothing before it, and its table and TOTAL read as if the fleet had cost
nothing until then (finance audit, 5 Dec; the page and the JSON say it too:
tests/frontend/test_finance5_before_accounting.py)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone


def test_qm_showback_says_the_time_before_the_accounting_was_not_recorded(qm, fleet) -> None:
    from django.db.models import Min

    from controlplane.models import Allocation, FleetRollup
    from controlplane.services import accounting
    from tests.controlplane.accounting.builders import hold, report, running_job

    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=8, started_at=start, priority_class=fleet.research)
    hold(job, [(fleet.nodes[1], 8)], start, start + timedelta(hours=1))
    report(Allocation.objects.get(job=job), fleet.nodes[1], start, start + timedelta(hours=1), tokens_per_s=10.0)
    accounting.catch_up(now)
    began = FleetRollup.objects.filter(bucket=accounting.MINUTE).aggregate(t=Min("start"))["t"]
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    lines = [line for line in r.out.splitlines() if line.startswith("Not recorded before")]
    assert lines == [f"Not recorded before {began:%Y-%m-%d %H:%M:%S} UTC, when the accounting began: these figures "
                     "count nothing before it (not $0.00 of use: no record)."], r.out

    inside = qm("showback", "--by", "team", "--window", "30m")
    assert inside.code == 0, inside.err
    assert "Not recorded" not in inside.out, inside.out
