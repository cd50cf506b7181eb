"""The admin's quota list and cohort page say a "lent now" that is no whole GPU as `qm quotas`
and the teams page say it: marked `≈`, with the note that it is a share (quota_text, one rule).
Until 2 Dec they read "2.7", as if 2.7 GPUs were lent."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.models import Cohort, Quota
from controlplane.services.quota_text import LENT_SHARE_NOTE
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.test_admin_quota_list_lent import _list

pytestmark = pytest.mark.django_db


@pytest.fixture
def three_lenders(fleet) -> None:  # type: ignore[no-untyped-def]
    """ml borrows 8 H100s from the idle guarantees of vision, audio and speech, 10 each: 8/3 each."""
    Quota.objects.filter(team=fleet.ml).update(nominal_gpus=2)
    Quota.objects.filter(team=fleet.vision).update(nominal_gpus=10)
    for name in ("audio", "speech"):
        f.make_quota(f.make_team(name, cohort=fleet.ml.cohort, default_priority_class=fleet.research), fleet.h100, 10)
    now = timezone.now()
    hold(running_job(fleet.ml, gpus=10, started_at=now), [(fleet.nodes[0], 8), (fleet.nodes[1], 2)], now)


def test_the_quota_list_marks_a_share_and_says_what_it_is(fleet, browser, three_lenders) -> None:
    rows = _list(browser)
    assert [rows[(t, "H100-80GB")]["Lent now"] for t in ("audio", "speech", "vision")] == ["≈2.7", "≈2.7", "≈2.7"]
    assert rows[("ml", "H100-80GB")]["Lent now"] == "0"
    html = browser.get("/admin/controlplane/quota/").content.decode()
    assert LENT_SHARE_NOTE in html.replace("&#x27;", "'")


def test_the_cohort_page_marks_a_share_and_says_what_it_is(fleet, browser, three_lenders) -> None:
    cohort = Cohort.objects.get(pk=fleet.ml.cohort_id)
    html = browser.get(f"/admin/controlplane/cohort/{cohort.pk}/change/").content.decode()
    members = html.split("Members and their quotas", 1)[1]
    table = re.search(r"<table>(.*?)</table>", members, re.S)
    assert table is not None
    lent = {cells[1]: cells[-1] for cells in (
        [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S) if "<td>" in row)}
    assert lent == {"audio": "≈2.7", "ml": "0", "speech": "≈2.7", "vision": "≈2.7"}
    assert LENT_SHARE_NOTE in members.replace("&#x27;", "'")


def test_whole_gpus_lent_get_no_mark_and_no_note(fleet, browser) -> None:
    now = timezone.now()
    for node in fleet.nodes[1:4]:
        hold(running_job(fleet.ml, gpus=8, started_at=now), [(node, 8)], now)
    rows = _list(browser)
    assert rows[("vision", "H100-80GB")]["Lent now"] == "8"
    assert "≈" not in browser.get("/admin/controlplane/quota/").content.decode()
