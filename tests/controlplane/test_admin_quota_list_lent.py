"""The admin's quota list and cohort page show, beside each quota, what the team holds, borrows
and lends now, the same figures as the teams page, and a team above its borrowing limit (after
its quota was lowered) is said to be.

Found on the demo: after vision's H100 quota was lowered from 40 to 16 while it ran 72 GPUs, the
quota list read "held now 72, above nominal (borrowed) 56, borrowing limit 32" with nothing
saying vision was 24 over its limit; language and serving lent vision 32 GPUs (the teams page:
"8 lent", "24 lent") but no admin page showed what a team lends; and the cohort page, where
borrowing is tuned, showed holdings only.
"""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.models import Cohort, Quota
from frontend import team_stats
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db

HEADERS = ["Team", "Cohort", "GPU type", "Nominal GPUs", "Held now", "Above nominal (borrowed)", "Lent now",
           "Borrowing limit", "Lending limit"]


def _list(browser) -> dict[tuple[str, str], dict[str, str]]:  # type: ignore[no-untyped-def]
    html = browser.get("/admin/controlplane/quota/").content.decode()
    html = html.split('id="result_list"', 1)[1].split("</table>", 1)[0]
    headers = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r'<th scope="col"[^>]*>(.*?)</th>', html, re.S)]
    headers = [h for h in headers if h]
    assert headers == HEADERS, headers
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)][1:]
        if len(cells) == len(HEADERS):
            named = dict(zip(HEADERS, cells, strict=True))
            rows[(named["Team"], named["GPU type"])] = named
    return rows


@pytest.fixture
def ml_borrows_8(fleet) -> None:  # type: ignore[no-untyped-def]
    """32 H100 in all, guaranteed 16 to ml and 16 to vision; ml holds 24, vision nothing."""
    now = timezone.now()
    for n in fleet.nodes[1:4]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(n, 8)], now)


def test_the_list_shows_held_borrowed_and_lent_as_the_teams_page_does(fleet, browser, ml_borrows_8) -> None:
    rows = _list(browser)

    ml, vision = rows[("ml", "H100-80GB")], rows[("vision", "H100-80GB")]
    assert (ml["Held now"], ml["Above nominal (borrowed)"], ml["Lent now"]) == ("24", "8", "0")
    assert (vision["Held now"], vision["Above nominal (borrowed)"], vision["Lent now"]) == ("0", "0", "8")
    assert ml["Borrowing limit"] == "no limit" and ml["Lending limit"] == "no limit"
    for row in team_stats.quota_rows(None):
        shown = rows[(row.team, row.gpu_type)]
        assert (shown["Held now"], shown["Above nominal (borrowed)"], shown["Lent now"]) == (
            str(row.used), str(row.borrowed), f"{row.lent:g}")


def test_a_team_above_its_borrowing_limit_is_said_to_be(fleet, browser, ml_borrows_8) -> None:
    Quota.objects.filter(team=fleet.ml, gpu_type=fleet.h100).update(nominal_gpus=12, borrowing_limit=4)

    ml = _list(browser)[("ml", "H100-80GB")]

    assert ml["Above nominal (borrowed)"] == "12 (8 over its borrowing limit 4)"


def test_the_cohort_page_shows_borrowed_and_lent(fleet, browser, ml_borrows_8) -> None:
    cohort = Cohort.objects.get(name="all")
    html = browser.get(f"/admin/controlplane/cohort/{cohort.pk}/change/").content.decode()
    table = re.search(r"<table>(.*?)</table>", html.split("Members and their quotas", 1)[1], re.S)
    assert table is not None
    head = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r'<th scope="col">(.*?)</th>', table.group(1), re.S)]
    rows = [[re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S) if "<td>" in row]

    assert head == ["GPU type", "team", "nominal", "borrowing limit", "lending limit", "held now", "borrowed", "lent"]
    assert rows == [["H100-80GB", "ml", "16", "no limit", "no limit", "24", "8", "0"],
                    ["H100-80GB", "vision", "16", "no limit", "no limit", "0", "0", "8"]]


def test_the_list_still_costs_the_same_queries_however_many_quotas(fleet, browser) -> None:
    browser.get("/admin/controlplane/quota/")
    with CaptureQueriesContext(connection) as few:
        browser.get("/admin/controlplane/quota/")
    now = timezone.now()
    for node in fleet.nodes[1:4]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)
    f.make_quota(fleet.ml, fleet.a100, 8)
    f.make_quota(fleet.vision, fleet.a100, 8)
    with CaptureQueriesContext(connection) as more:
        browser.get("/admin/controlplane/quota/")
    assert len(more) == len(few)


def test_a_team_lending_beyond_its_lending_limit_is_said_to_be_wherever_its_lent_gpus_are(
        fleet, browser, ml_borrows_8) -> None:
    """The lender's side of a lowered limit, as the borrower's: vision's lending limit lowered to 3
    under the 8 GPUs ml borrows of its guarantee. The save's warning says "10 beyond its new
    lending limit"; until 7 Dec the list, the cohort page and the teams page then read "lent 8"
    beside "lending limit 3" ("lends at most 3 — uses 0, 8 lent") with nothing saying so, where a
    borrower over its limit reads "(8 over its borrowing limit 4)"."""
    Quota.objects.filter(team=fleet.vision, gpu_type=fleet.h100).update(lending_limit=3)

    vision = _list(browser)[("vision", "H100-80GB")]
    cohort = Cohort.objects.get(name="all")
    members = browser.get(f"/admin/controlplane/cohort/{cohort.pk}/change/").content.decode()
    teams = re.sub(r"<[^>]+>", "", browser.get("/teams/").content.decode())

    assert vision["Lent now"] == "8 (5 over its lending limit 3)"
    assert vision["Lending limit"] == "3"
    assert "<td>8 (5 over its lending limit 3)</td>" in members
    assert "lends at most 3 — uses 0, 8 lent, 5 over its lending limit" in teams


def test_the_quota_page_shows_what_the_team_runs_and_lends_before_it_is_changed(
        fleet, browser, ml_borrows_8) -> None:
    """An admin about to lower a nominal or a limit reads, beside the fields, what the team holds
    and lends under this quota now, as the list shows it; until 7 Dec the quota's page showed the
    bare fields, and the figures came only in the warning after the save."""
    ml = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    vision = Quota.objects.get(team=fleet.vision, gpu_type=fleet.h100)
    Quota.objects.filter(pk=vision.pk).update(lending_limit=3)

    def now_said(quota: Quota) -> str:
        page = browser.get(f"/admin/controlplane/quota/{quota.pk}/change/").content.decode()
        found = re.search(r'<div class="form-row field-in_use_now">.*?<div class="readonly">(.*?)</div>', page, re.S)
        assert found is not None, page[:3000]
        return re.sub(r"<[^>]+>", "", found.group(1)).strip()

    assert now_said(ml) == "holds 24 H100-80GB GPUs: 8 above its nominal (borrowed); lends 0"
    assert now_said(vision) == "holds 0 H100-80GB GPUs: 0 above its nominal (borrowed); lends 8 (5 over its lending limit 3)"
    assert "In use now" in browser.get(f"/admin/controlplane/quota/{ml.pk}/change/").content.decode()
    assert browser.get("/admin/controlplane/quota/add/").status_code == 200
