"""`qm sshare` (Slurm's sshare): every team's fair share, lowest first, with its parts."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.services import cycle
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_sshare_lists_every_team_lowest_first(alice_qm, fleet) -> None:
    f.make_job(fleet.ml, fleet.research, name="big", gpus=16, submitted_at=timezone.now() - timedelta(minutes=1))
    assert cycle.run_cycle("w").binds == 1
    # 18 GPU-seconds of past usage: "< 0.01", where one decimal said "0.0" as for none
    fleet.vision.decayed_gpu_seconds, fleet.vision.usage_as_of = 18.0, timezone.now()
    fleet.vision.save(update_fields=["decayed_gpu_seconds", "usage_as_of"])

    run = alice_qm("sshare")

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert re.match(r"TEAM\s+SHARE\s+OF\s+GPU SHARE\s+CPU SHARE\s+MEM SHARE\s+GPUS HELD\s+GPU-H DECAYED$", lines[0])
    assert re.match(r"vision\s+0\.000\s+gpus\s+0\.000\s+0\.000\s+0\.000\s+0\s+< 0\.01$", lines[1]), run.out
    assert re.match(r"ml\s+0\.333\s+gpus\s+0\.333\s+\d\.\d{3}\s+\d\.\d{3}\s+16\s+(0|\d+\.\d\d)$", lines[2]), run.out
    # the half-life in the teams page's words ("halved every 7.0 days"), where qm said "a 7d half-life"
    assert lines[3].startswith("SHARE: the largest of a team's GPU, CPU and memory shares (held now + past usage "
                               "decayed, halved every 7.0 days, over the fleet)")
    assert _page_half_life(604800) == "halved every 7.0 days"
    assert '"half_life_s": 604800' in alice_qm("--json", "sshare").out


def _page_half_life(seconds: float) -> str:
    """How the teams page's Fair-share usage heading says the half-life (teams.html)."""
    from django.template import Context, Template

    return Template("{% load qm %}halved every {{ s|duration }}").render(Context({"s": seconds}))
