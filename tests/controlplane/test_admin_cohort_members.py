"""The cohort's admin page shows what the cohort pools: each member team's quota per GPU type,
its borrowing and lending limits and what it holds now. Before, it showed only the name and the
description, so an admin tuning borrowing had to piece the cohort together from other pages."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.models import Cohort
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db


def _body(html: str) -> str:
    table = re.search(r"<table>(.*?)</table>", html.split("Members and their quotas", 1)[1], re.S)
    assert table, "no members table"
    return table.group(1).split("<tbody>", 1)[1]


def _rows(html: str) -> list[list[str]]:
    return [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", _body(html), re.S)]


def test_the_cohort_page_lists_each_members_quota_limits_and_holdings(fleet, browser) -> None:
    now = timezone.now()
    hold(running_job(fleet.vision, gpus=8, started_at=now), [(fleet.nodes[1], 8)], now)
    ml_h100 = fleet.ml.quotas.get(gpu_type=fleet.h100)
    ml_h100.borrowing_limit, ml_h100.lending_limit = 8, 4
    ml_h100.save()
    cohort = Cohort.objects.get(name="all")

    html = browser.get(f"/admin/controlplane/cohort/{cohort.pk}/change/").content.decode()

    assert _rows(html) == [["H100-80GB", "ml", "16", "8", "4", "0", "0", "0"],
                           ["H100-80GB", "vision", "16", "no limit", "no limit", "8", "0", "0"]]
    # Each row headed by its GPU type and team, so a screen reader names a figure's row (until
    # 6 Dec its cells were all plain td: "8" said with its column only).
    for row in re.findall(r"<tr>(.*?)</tr>", _body(html), re.S):
        assert re.match(r'<th scope="row">[^<]+</th><th scope="row">[^<]+</th><td>', row), row


def test_the_cohort_list_counts_member_teams(fleet, browser) -> None:
    f.make_cohort("empty")
    html = browser.get("/admin/controlplane/cohort/").content.decode()
    cells = {name: [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", rest, re.S)]
             for name, rest in re.findall(r'<th class="field-name"><a [^>]*>([^<]+)</a></th>(.*?)</tr>', html, re.S)}
    assert cells["all"][-1] == "2" and cells["empty"][-1] == "0", cells
