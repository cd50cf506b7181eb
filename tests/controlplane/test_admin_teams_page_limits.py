"""The teams page says when a team holds more than its quota and borrowing limit allow, as the
admin's quota list does, and shows an unlimited borrowing limit as "no limit", as the admin pages do.

Found on the demo after vision's H100 quota was lowered from 40 to 16 under 72 running GPUs:
/teams/ read "H100-80GB: 16 / 32 — uses 72, 56 borrowed", leaving the reader to work out that
vision was 24 beyond its limit (the reason its jobs waited), while the admin's list said so.
"""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.models import Quota
from tests.controlplane.accounting.builders import hold, running_job

pytestmark = pytest.mark.django_db


def _quota_cell(html: str, team: str) -> str:
    for row in re.findall(r'<tr><th scope="row">(.*?)</tr>', html, re.S):
        if row.startswith(f"{team}</th>"):
            cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", "<th>" + row, re.S)
            return " ".join(re.sub(r"<[^>]+>", " ", cells[3]).split())
    raise AssertionError(f"no row for {team}")


@pytest.fixture
def ml_holds_24(fleet) -> None:  # type: ignore[no-untyped-def]
    now = timezone.now()
    for n in fleet.nodes[1:4]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(n, 8)], now)


def test_a_team_beyond_its_borrowing_limit_is_said_to_be(fleet, browser, ml_holds_24) -> None:
    Quota.objects.filter(team=fleet.ml, gpu_type=fleet.h100).update(nominal_gpus=12, borrowing_limit=4)

    cell = _quota_cell(browser.get("/teams/").content.decode(), "ml")

    assert cell == "H100-80GB: 12 / 4 — uses 24, 12 borrowed, 8 over its borrowing limit"


def test_within_its_limit_nothing_more_is_said(fleet, browser, ml_holds_24) -> None:
    cell = _quota_cell(browser.get("/teams/").content.decode(), "ml")

    assert cell == "H100-80GB: 16 / no limit — uses 24, 8 borrowed"


def test_a_lending_limit_is_said_when_set(fleet, browser, ml_holds_24) -> None:
    """An admin tuning a cohort reads each quota's lending limit where its borrowing limit is (the
    page left it out: a team lending at most 4 of its 16 read as lending all of them)."""
    Quota.objects.filter(team=fleet.vision, gpu_type=fleet.h100).update(lending_limit=4)

    html = browser.get("/teams/").content.decode()

    assert _quota_cell(html, "vision").startswith("H100-80GB: 16 / no limit, lends at most 4 — uses 0")
    assert _quota_cell(html, "ml") == "H100-80GB: 16 / no limit — uses 24, 8 borrowed"
