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


def test_qm_showback_of_a_period_before_the_accounting_shows_no_figures(qm, fleet) -> None:
    """A month before the accounting began printed finance a table with `__idle__` and TOTAL at
    0.00 under a line saying only that nothing before the accounting counted: as the page
    (tests/frontend/test_finance6_unrecorded_period.py), no figures, and why (6 Dec)."""
    from django.db.models import Min

    from controlplane.models import FleetRollup
    from controlplane.services import accounting

    accounting.catch_up(timezone.now())
    began = FleetRollup.objects.filter(bucket=accounting.MINUTE).aggregate(t=Min("start"))["t"]
    month = f"{accounting.floor_month(began) - timedelta(days=1):%Y-%m}"
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--month", month)

    assert r.code == 0, r.err
    assert "TOTAL" not in r.out and "__idle__" not in r.out, r.out
    assert (f"Nothing was recorded in this period: the accounting began at {began:%Y-%m-%d %H:%M:%S} UTC, after it "
            "ended (not $0.00 of use: no record).") in r.out, r.out
    csv_text = qm("showback", "--by", "team", "--month", month, "--csv")
    assert csv_text.code == 0 and csv_text.out.splitlines()[-1].startswith("TOTAL"), csv_text.out  # the API's, as asked
