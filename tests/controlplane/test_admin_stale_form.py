"""Two admins editing the same record: a change saved by one since the other opened the page is
never silently undone by the other's save.

Found on the demo (two admin sessions on /admin/controlplane/quota/4/change/): admin B lowered
language's A100 borrowing limit from 8 to 4; admin A, whose page still showed 8, raised the
nominal from 16 to 20 and saved. A's save wrote the whole form back, so the borrowing limit
returned to 8 without either of them knowing (the trail read "nominal 16 → 20, borrowing limit
4 → 8" under A's name, a change A never made).

Now the page remembers what it showed when it was opened: a field the other admin changed and
this one left alone keeps the other's value (and the page says so); a field both changed is
refused on the field, naming who changed it and to what, and shows the stored value, so the
second save is a decision.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from controlplane.choices import EventKind
from controlplane.models import Event, PriceRate, PriorityClass, Quota
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def carol(fleet) -> Client:  # type: ignore[no-untyped-def]
    """A second admin, signed in on her own."""
    f.make_user("carol", superuser=True)
    client = Client()
    assert client.login(username="carol", password="carol")
    return client


def _messages(response: Any) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_a_field_changed_by_another_admin_since_the_page_opened_keeps_her_value(fleet, browser, carol) -> None:
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)
    path = f"/admin/controlplane/quota/{quota.pk}/change/"
    mine = f.opened_admin_form(browser, path)
    hers = f.opened_admin_form(carol, path)
    hers["borrowing_limit"] = 4
    assert carol.post(path, hers).status_code == 302

    mine["nominal_gpus"] = 24
    r = browser.post(path, mine, follow=True)

    assert r.status_code == 200 and r.redirect_chain, r.content[:3000]
    quota.refresh_from_db()
    assert (quota.nominal_gpus, quota.borrowing_limit) == (24, 4)
    last = Event.objects.filter(kind=EventKind.QUOTA_CHANGED).order_by("-id").first()
    assert last is not None and last.actor == "user:boss"
    assert last.message == "Quota of ml on H100-80GB changed: nominal 16 → 24"
    assert any("Kept the change user:carol saved since you opened this page: borrowing limit none → 4" in m
               for m in _messages(r)), _messages(r)


def test_a_field_both_admins_changed_is_refused_naming_who_and_the_stored_value(fleet, browser, carol) -> None:
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)
    path = f"/admin/controlplane/quota/{quota.pk}/change/"
    mine = f.opened_admin_form(browser, path)
    hers = f.opened_admin_form(carol, path)
    hers["nominal_gpus"] = 12
    assert carol.post(path, hers).status_code == 302
    events = Event.objects.count()

    mine["nominal_gpus"] = 24
    r = browser.post(path, mine)

    assert r.status_code == 200
    errors = r.context["adminform"].form.errors
    assert list(errors) == ["nominal_gpus"]
    [error] = errors["nominal_gpus"]
    assert error.startswith("user:carol changed this from 16 to 12 since you opened this page; your 24 was not saved.")
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 12 and Event.objects.count() == events
    # The page now shows what is stored; saving it again is a decision, and goes through.
    again = {k: v for k, v in f.admin_change_form(r).items() if v is not False}
    assert again["nominal_gpus"] in (12, "12")
    again["nominal_gpus"] = 24
    assert browser.post(path, again).status_code == 302
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 24


def test_a_quota_changed_on_its_page_is_not_undone_by_a_save_of_the_team_page(fleet, browser, carol) -> None:
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)
    team_path = f"/admin/controlplane/team/{fleet.ml.pk}/change/"
    mine = f.opened_admin_form(browser, team_path)
    hers = f.opened_admin_form(carol, f"/admin/controlplane/quota/{quota.pk}/change/")
    hers["nominal_gpus"] = 8
    assert carol.post(f"/admin/controlplane/quota/{quota.pk}/change/", hers).status_code == 302

    mine["description"] = "machine learning"
    r = browser.post(team_path, mine)

    assert r.status_code == 302, r.content[:3000]
    assert Quota.objects.get(pk=quota.pk).nominal_gpus == 8
    assert not Event.objects.filter(kind=EventKind.QUOTA_CHANGED, actor="user:boss").exists()


def test_a_priority_class_keeps_both_admins_changes_to_different_fields(fleet, browser, carol) -> None:
    path = f"/admin/controlplane/priorityclass/{fleet.research.pk}/change/"
    mine = f.opened_admin_form(browser, path)
    hers = f.opened_admin_form(carol, path)
    hers["grace_period_s"] = 300
    assert carol.post(path, hers).status_code == 302

    mine["preemption_budget"] = 1
    assert browser.post(path, mine).status_code == 302

    research = PriorityClass.objects.get(pk=fleet.research.pk)
    assert (research.grace_period_s, research.preemption_budget) == (300, 1)
    mine_event = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, actor="user:boss").get()
    assert mine_event.data["before"]["grace_period_s"] == mine_event.data["after"]["grace_period_s"] == 300


def test_a_page_submitted_without_what_it_showed_saves_as_before(fleet, browser) -> None:
    """Scripts that post the form's fields only (no opened_as) are not refused."""
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)
    r = browser.post(f"/admin/controlplane/quota/{quota.pk}/change/", {
        "team": fleet.ml.pk, "gpu_type": fleet.h100.pk, "nominal_gpus": 20, "borrowing_limit": "",
        "lending_limit": ""})
    assert r.status_code == 302 and Quota.objects.get(pk=quota.pk).nominal_gpus == 20


def test_a_quota_row_deleted_by_another_admin_is_left_out_of_the_team_page_save(fleet, browser, carol) -> None:
    """Before: "Please correct the error below." above a page with no error on it (the row's
    hidden id was refused, and the row, no longer the team's, was not shown again), and no way
    to save the team page but to reload it."""
    quota = fleet.ml.quotas.get(gpu_type=fleet.h100)
    team_path = f"/admin/controlplane/team/{fleet.ml.pk}/change/"
    mine = f.opened_admin_form(browser, team_path)
    assert carol.post(f"/admin/controlplane/quota/{quota.pk}/delete/", {"post": "yes"}).status_code == 302

    mine["description"] = "machine learning"
    r = browser.post(team_path, mine, follow=True)

    assert r.status_code == 200 and r.redirect_chain, r.content[:3000]
    assert type(fleet.ml).objects.get(pk=fleet.ml.pk).description == "machine learning"
    assert not Quota.objects.filter(pk=quota.pk).exists()
    assert ("Quota ml × H100-80GB: 16 was deleted by user:carol since you opened this page: its row on your page "
            "was left out, nothing of it saved.") in _messages(r)


def _open_price(client: Client, path: str) -> dict[str, Any]:
    """The page's form with its start as the two inputs the page posts (date, time)."""
    form = f.opened_admin_form(client, path)
    start = form.pop("effective_from")
    form["effective_from_0"], form["effective_from_1"] = f"{start:%Y-%m-%d}", f"{start:%H:%M:%S}"
    return form


def test_a_price_keeps_both_admins_changes_to_its_date_and_its_rate(fleet, browser, carol) -> None:
    """The date and time of a price's start is a two-part field: kept like any other."""
    rate = PriceRate.objects.get(gpu_type=fleet.h100)
    path = f"/admin/controlplane/pricerate/{rate.pk}/change/"
    mine = _open_price(browser, path)
    hers = _open_price(carol, path)
    hers["effective_from_0"], hers["effective_from_1"] = "2026-02-01", "00:00:00"
    assert carol.post(path, hers).status_code == 302

    mine["usd_per_gpu_hour"] = "3.1000"
    r = browser.post(path, mine, follow=True)

    assert r.status_code == 200 and r.redirect_chain, r.context["adminform"].form.errors
    rate.refresh_from_db()
    assert str(rate.usd_per_gpu_hour) == "3.1000" and rate.effective_from.date().isoformat() == "2026-02-01"
    assert any(m.startswith("Kept the change user:carol saved since you opened this page: effective from")
               for m in _messages(r)), _messages(r)


def test_a_price_both_admins_dated_is_refused_and_shows_the_stored_date(fleet, browser, carol) -> None:
    rate = PriceRate.objects.get(gpu_type=fleet.h100)
    path = f"/admin/controlplane/pricerate/{rate.pk}/change/"
    mine = _open_price(browser, path)
    hers = _open_price(carol, path)
    hers["effective_from_0"] = "2026-02-01"
    assert carol.post(path, hers).status_code == 302

    mine["effective_from_0"] = "2026-03-01"
    r = browser.post(path, mine)

    assert r.status_code == 200
    assert list(r.context["adminform"].form.errors) == ["effective_from"], r.context["adminform"].form.errors
    assert 'value="2026-02-01"' in r.content.decode()
