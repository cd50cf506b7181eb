"""The teams page, its chart, `qm sshare` and the API say what the dominant share is: the largest
of a team's GPU, CPU and memory shares, each what it holds now plus its past usage decayed by the
half-life, over the fleet (services/fair_share.py, scheduler_core/fairshare.py). Found by the
operator review (7 Dec): the page's column said "Dominant share now" and its chart "of any one
fleet resource … it holds", beside a team that held nothing and read 10%: its past week's use."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.models import Team
from frontend import figures

WORDS = "held now + past usage decayed"


def test_a_team_holding_nothing_shows_its_decayed_usage_and_every_surface_says_so(qm, fleet) -> None:
    # ml holds nothing; its past: 48 GPUs for ~2.4 h as of now, decayed (a 10% GPU share of 48)
    Team.objects.filter(pk=fleet.ml.pk).update(decayed_gpu_seconds=0.1 * 48 * 604800 / 0.6931471805599453,
                                               usage_as_of=timezone.now())
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0
    row = next(r for r in qm("sshare", "--json").json()["teams"] if r["team"] == "ml")
    assert row["held_now"]["gpus"] == 0 and row["dominant_share"] == pytest.approx(0.1, abs=1e-3)  # the premise

    page = Client()
    assert page.login(username="root", password="root")
    html = page.get("/teams/").content.decode()
    heading = re.search(r'<th scope="col">(Dominant share.*?)</th>', html, re.S)
    assert heading, html
    said = " ".join(re.sub(r"<[^>]+>", "", heading.group(1)).split())
    assert said == f"Dominant share ({WORDS}, over the fleet: qm sshare's SHARE)", said
    assert re.search(r'<td class="dominant-share"[^>]*>10\.0%</td>', html)

    caption = figures.dominant_share([], {"ml": fleet.ml.pk}).caption
    assert "it holds" not in caption and "plus its past usage decayed by the fair-share half-life" in caption, caption
    assert f"({WORDS}, halved every" in qm("sshare").out

    schema = page.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    row_schema = schema["components"]["schemas"]["FairShareRow"]["properties"]
    assert WORDS in row_schema["dominant_share"]["description"], row_schema["dominant_share"]
