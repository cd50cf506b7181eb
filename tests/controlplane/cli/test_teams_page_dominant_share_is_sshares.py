"""Operator review, 7 Dec: /teams/'s "Dominant share now" read the last cycle's fleet sample
while `qm sshare` computes the shares live (services/fair_share.py), so after a change in
allocations with no cycle since (a job released between cycles, a leader away) the page said
one share and `qm sshare` another. Both now read `fair_share.fair_shares`, and the page says the
instant its shares are as of; its fair-share usage column, the same function's decayed GPU-hours,
agrees with sshare's GPU-H DECAYED too."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.models import Allocation, FleetSample
from controlplane.services import cycle, transitions
from tests.controlplane import factories as f


def page_shares(html: str) -> dict[str, str]:
    """The "Dominant share now" cell of each team's row, as shown."""
    return dict(re.findall(r'<th scope="row">([^<]+)</th>.*?<td class="dominant-share"[^>]*>([^<]+)</td>', html, re.S))


@pytest.mark.parametrize("change", ["released", "bound"])
def test_the_teams_page_and_qm_sshare_give_the_same_share_after_a_change_with_no_cycle_since(
        qm, fleet, change: str) -> None:
    now = timezone.now()
    f.make_job(fleet.ml, fleet.research, name="big", gpus=16, submitted_at=now - timedelta(minutes=2))
    assert cycle.run_cycle("w", now=now - timedelta(seconds=60)).binds == 1
    cycle.run_cycle("w", now=now - timedelta(seconds=30))   # its sample sees ml holding 16 of the fleet's 48 GPUs
    sampled = FleetSample.objects.order_by("-at").first()
    assert sampled.dominant_share_by_team["ml"] == pytest.approx(16 / 48, abs=1e-3)
    if change == "released":
        allocation = Allocation.objects.get(job__name="big")
        at = timezone.now()
        assert transitions.signal_stop(allocation.pk, allocation.generation, reason=transitions.RELEASE_PREEMPTED,
                                       grace_period_s=30, at=at, actor="test", message="preempted")
        assert transitions.complete_release(allocation.pk, exit_code=None, at=at, actor="test")
    else:
        # vision's job bound by hand (no cycle): held now, in no sample yet
        from tests.controlplane.accounting.builders import hold, running_job
        job = running_job(fleet.vision, gpus=8, started_at=timezone.now(), priority_class=fleet.production)
        hold(job, [(fleet.nodes[3], 8)], timezone.now())
    assert FleetSample.objects.order_by("-at").first() == sampled   # no cycle since

    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0
    sshare = qm("sshare", "--json")
    assert sshare.code == 0, sshare.err
    live = {row["team"]: row for row in sshare.json()["teams"]}
    table = qm("sshare")
    assert table.code == 0, table.err
    page = Client()
    assert page.login(username="root", password="root")
    response = page.get("/teams/")
    html = response.content.decode()

    shown = page_shares(html)
    assert set(shown) == {"ml", "vision"}, html
    for team, row in live.items():
        assert shown[team] == f"{100 * row['dominant_share']:.1f}%", (team, shown, row)
        line = next(line for line in table.out.splitlines() if line.startswith(f"{team} "))
        assert line.split()[1] == f"{row['dominant_share']:.3f}", line
        context_row = next(r for r in response.context["team_table"] if r["team"].name == team)
        assert context_row["decayed_gpu_hours"] == pytest.approx(row["decayed_usage"]["gpu_hours"], rel=1e-3, abs=1e-6)
    if change == "released":
        assert shown["ml"] == "0.0%"     # the sample said 33%
    else:
        assert shown["vision"] == f"{100 * 8 / 48:.1f}%" and shown["ml"] == f"{100 * 16 / 48:.1f}%"
    # the page says which instant its shares are as of (the request's, as sshare's)
    said = re.search(r'<span id="shares-as-of">as of (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC</span>, as '
                     r'<code>qm sshare</code> reads them', html)
    assert said, html
