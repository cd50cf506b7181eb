"""An admin tuning quotas sees, beside each nominal and limit, what the team holds of that GPU
type now and how much of it is above its nominal (borrowed), as Kueue shows a ClusterQueue's
usage beside its quota. Before, the list showed only the configured numbers."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db


def _row(html: str, team: str, gpu_type: str) -> list[str]:
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        if team in cells and gpu_type in cells:
            return cells
    raise AssertionError(f"no row for {team} on {gpu_type}")


def test_the_quota_list_shows_what_each_team_holds_and_what_is_above_nominal(fleet, browser) -> None:
    now = timezone.now()
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)
    quota.nominal_gpus = 10
    quota.save()
    for node in fleet.nodes[1:3]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)

    html = browser.get("/admin/controlplane/quota/").content.decode()

    cells = _row(html, "ml", "H100-80GB")
    nominal = cells.index("10")
    assert cells[nominal + 1:nominal + 3] == ["16", "6"], cells
    assert "all" in cells  # its cohort
    assert "Held now" in html and "Above nominal (borrowed)" in html


def test_the_quota_list_counts_in_one_query_however_many_quotas(fleet, browser) -> None:
    browser.get("/admin/controlplane/quota/")
    with CaptureQueriesContext(connection) as few:
        browser.get("/admin/controlplane/quota/")
    now = timezone.now()
    for node in fleet.nodes[1:4]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)
    f.make_quota(fleet.ml, fleet.a100, 8)
    f.make_quota(fleet.vision, fleet.a100, 8)
    with CaptureQueriesContext(connection) as more:
        browser.get("/admin/controlplane/quota/?o=5")
    assert len(more) == len(few)
