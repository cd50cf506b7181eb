"""Deleting a team, priority class, GPU type or node that has history: the admin's page says in a
few lines what history stops it, instead of listing every row of it.

Found on the demo and measured here: the delete page of a team with one quota and a week of
minute rollups (20,160 rows) took 2.1 s and 1.2 MB to list "Quota rollup: quota 3/2 Minute
2026-11-30 01:41" twenty thousand times, loading every row, and said nothing of what to do
instead.
"""

from __future__ import annotations

import html
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.models import GpuType, QuotaRollup, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _minutes_of_history(team: Team, gpu_type, n: int) -> None:  # type: ignore[no-untyped-def]
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(days=7)
    QuotaRollup.objects.bulk_create([
        QuotaRollup(bucket=60, start=start + timedelta(minutes=i), team=team, gpu_type=gpu_type,
                    nominal_gpu_seconds=Decimal(960), used_gpu_seconds=0, borrowed_gpu_seconds=0,
                    lent_gpu_seconds=0, idle_gpu_seconds=Decimal(960), idle_cost_usd=0)
        for i in range(n)], batch_size=5000)


def _text(response) -> str:  # type: ignore[no-untyped-def]
    return html.unescape(" ".join(response.content.decode().split()))


def test_a_team_with_history_is_refused_in_a_few_lines(fleet, browser) -> None:
    _minutes_of_history(fleet.ml, fleet.h100, 3000)
    f.make_job(fleet.ml)

    r = browser.get(f"/admin/controlplane/team/{fleet.ml.pk}/delete/")

    page = _text(r)
    assert "Cannot delete team" in page
    assert "<li>Jobs: 1</li>" in page and "<li>Quota rollups: 3,000</li>" in page
    assert ("Team ml has history that accounting and the audit trail keep. To retire it, take it out of its "
            "cohort and delete its quotas and memberships on this team's page.") in page
    assert "Quota rollup: quota" not in page
    assert len(r.content) < 20_000


def test_the_page_costs_the_same_however_long_the_history(fleet, browser) -> None:
    _minutes_of_history(fleet.ml, fleet.h100, 10)
    with CaptureQueriesContext(connection) as short:
        browser.get(f"/admin/controlplane/team/{fleet.ml.pk}/delete/")
    _minutes_of_history(fleet.ml, fleet.a100, 5000)
    with CaptureQueriesContext(connection) as long:
        r = browser.get(f"/admin/controlplane/team/{fleet.ml.pk}/delete/")
    assert "<li>Quota rollups: 5,010</li>" in _text(r)
    assert len(long) == len(short)


def test_a_team_with_history_is_not_deleted_by_a_post_either(fleet, browser) -> None:
    f.make_job(fleet.ml)

    r = browser.post(f"/admin/controlplane/team/{fleet.ml.pk}/delete/", {"post": "yes"})

    assert r.status_code == 200 and "Cannot delete team" in _text(r)
    assert Team.objects.filter(pk=fleet.ml.pk).exists()


def test_a_team_without_history_is_deleted_as_before(fleet, browser) -> None:
    team = f.make_team("fresh")
    f.make_quota(team, fleet.h100, 4)

    page = _text(browser.get(f"/admin/controlplane/team/{team.pk}/delete/"))
    assert "Are you sure you want to delete the team" in page and "fresh × H100-80GB: 4" in page
    assert browser.post(f"/admin/controlplane/team/{team.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Team.objects.filter(pk=team.pk).exists()


def test_a_priority_class_in_use_says_so(fleet, browser) -> None:
    f.make_job(fleet.ml, priority_class=fleet.research)

    page = _text(browser.get(f"/admin/controlplane/priorityclass/{fleet.research.pk}/delete/"))

    assert "Cannot delete priority class" in page and "<li>Jobs: 1</li>" in page
    assert "Priority class research has history that accounting and the audit trail keep." in page


def test_a_gpu_type_used_only_by_quotas_says_to_delete_them_first(fleet, browser) -> None:
    b200 = f.make_gpu_type("B200", 192)
    f.make_quota(fleet.ml, b200, 8)

    page = _text(browser.get(f"/admin/controlplane/gputype/{b200.pk}/delete/"))

    assert "Cannot delete GPU type" in page and "<li>Quotas: 1 (delete or change them first): ml × B200: 8</li>" in page
    assert "history" not in page


def _empty_minutes(team: Team, gpu_type, n: int) -> None:  # type: ignore[no-untyped-def]
    """What accounting wrote until 6 Dec for a quota on a type with no GPUs in the fleet: a row
    a minute with nothing in it."""
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(days=1)
    QuotaRollup.objects.bulk_create([
        QuotaRollup(bucket=60, start=start + timedelta(minutes=i), team=team, gpu_type=gpu_type,
                    nominal_gpu_seconds=0, used_gpu_seconds=0, borrowed_gpu_seconds=0, lent_gpu_seconds=0,
                    idle_gpu_seconds=0, idle_cost_usd=0)
        for i in range(n)])


def test_a_gpu_type_whose_quota_is_gone_and_never_had_a_node_is_deleted(fleet, browser) -> None:
    """Found by a fleet admin (6 Dec): B200 was given a quota before any B200 node came; the
    order was cancelled, the quota removed, and the type could never be deleted: "Quota
    rollups: 1,440 … has history", every row of it zeros."""
    b200 = f.make_gpu_type("B200", 192)
    f.make_price_rate(b200, "4.0000")
    _empty_minutes(fleet.ml, b200, 1440)

    page = _text(browser.get(f"/admin/controlplane/gputype/{b200.pk}/delete/"))
    assert "Are you sure you want to delete the GPU type" in page, page[:3000]
    assert "Quota rollup" not in page and "<li>Price rates: 1</li>" in page
    assert browser.post(f"/admin/controlplane/gputype/{b200.pk}/delete/", {"post": "yes"}).status_code == 302

    assert not GpuType.objects.filter(pk=b200.pk).exists()
    assert not QuotaRollup.objects.filter(gpu_type_id=b200.pk).exists()
    assert QuotaRollup.objects.filter(team=fleet.ml).count() == 0


def test_a_gpu_type_with_real_quota_history_is_still_refused(fleet, browser) -> None:
    b200 = f.make_gpu_type("B200", 192)
    _empty_minutes(fleet.ml, b200, 100)
    _minutes_of_history(fleet.ml, b200, 3)

    page = _text(browser.get(f"/admin/controlplane/gputype/{b200.pk}/delete/"))
    assert "Cannot delete GPU type" in page and "<li>Quota rollups: 3</li>" in page
    assert ("GPU type B200 has history that accounting and the audit trail keep. It stays for the reports: with no "
            "nodes and no quotas of this type, no job can run on it") in page

    r = browser.post(f"/admin/controlplane/gputype/{b200.pk}/delete/", {"post": "yes"})
    assert r.status_code == 200 and "Cannot delete GPU type" in _text(r)
    assert QuotaRollup.objects.filter(gpu_type=b200).count() == 103


def test_a_team_with_only_empty_quota_rows_is_deleted(fleet, browser) -> None:
    team = f.make_team("fresh")
    b200 = f.make_gpu_type("B200", 192)
    _empty_minutes(team, b200, 60)

    assert browser.post(f"/admin/controlplane/team/{team.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Team.objects.filter(pk=team.pk).exists()


def test_a_class_with_history_names_the_teams_whose_default_it_is(fleet, browser) -> None:
    f.make_job(fleet.ml, priority_class=fleet.research)

    page = _text(browser.get(f"/admin/controlplane/priorityclass/{fleet.research.pk}/delete/"))

    assert ("Priority class research has history that accounting and the audit trail keep. To retire it, give "
            "team ml, whose default it is, another default class on its page.") in page


def test_a_class_with_history_that_is_no_teams_default_says_nothing_of_defaults(fleet, browser) -> None:
    """Found by an operator walk (8 Dec): a class no team has as its default was told to "give the
    teams whose default it is another one"."""
    legacy = f.make_priority_class("legacy", 50)
    f.make_job(fleet.ml, priority_class=legacy)

    page = _text(browser.get(f"/admin/controlplane/priorityclass/{legacy.pk}/delete/"))

    assert "Cannot delete priority class" in page and "<li>Jobs: 1</li>" in page
    assert ("Priority class legacy has history that accounting and the audit trail keep. It is no team's "
            "default class; it stays for the reports.") in page
    assert "whose default" not in page
