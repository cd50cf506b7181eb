"""The scheduler policy the cycle runs with (placement, backfill, fair share's half-life, the
locality weights, the per-cycle caps, the loop's timings) is shown read-only in the admin, beside
the quotas and priority classes admins tune there: every setting with its value, unit, what it
does and where it is set, from the API's own source (services/scheduler_policy.py). Before
(7 Dec) only `GET scheduler/policy/` and `qm config` said it; the admin had no word of it."""

from __future__ import annotations

import dataclasses
import re
from html import unescape
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.test import Client, override_settings

from controlplane.services import scheduler_policy
from controlplane.services.snapshot import scheduler_config
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
PAGE = "/admin/controlplane/schedulerlease/policy/"


def _rows(html: str) -> dict[str, list[str]]:
    """The page's table rows by setting: [value, unit, what it does, where it is set]."""
    rows = {}
    for row in re.findall(r"<tr><th scope=\"row\">(.*?)</tr>", html, re.S):
        cells = [unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in re.split(r"</t[hd]>", row) if c.strip()]
        rows[cells[0]] = cells[1:]
    return rows


def test_the_admin_index_lists_the_scheduler_policy(fleet, browser) -> None:
    html = browser.get("/admin/").content.decode()
    assert f'<a href="{PAGE}">Scheduler policy</a>' in html


def test_every_setting_is_said_with_its_value_unit_meaning_and_where_it_is_set(fleet, browser) -> None:
    html = browser.get(PAGE).content.decode()
    rows = _rows(html)
    api = client_for(fleet, "admin").get("/api/v1/scheduler/policy/").json()
    engine_fields = {f.name for f in dataclasses.fields(scheduler_config())}
    assert engine_fields | {name.lower() for name in scheduler_policy.LOOP_SETTINGS} == set(rows)
    assert set(api["engine"]) | set(api["loop"]) == set(rows)
    for name, (value, unit, does, where) in rows.items():
        assert value and does and where, name
    assert rows["fair_share_half_life_s"][0:2] == [str(int(api["engine"]["fair_share_half_life_s"])), "s"]
    assert rows["fair_share_half_life_s"][3] == "environment variable QM_FAIR_SHARE_HALF_LIFE_S"
    assert rows["placement_by_workload"][0] == "training: pack, batch: pack, interactive: pack, serving: spread"
    assert rows["placement_by_workload"][3] == "environment variable QM_PLACEMENT_POLICY"
    assert rows["backfill"][0:2] == ["on", "on/off"]
    assert rows["backfill"][3].startswith("fixed in the engine's default")
    assert rows["locality_weights"][0] == "0, 1, 10, 30"
    assert rows["cycle_interval_s"][3] == "environment variable QM_CYCLE_INTERVAL_S"
    assert "restart them" in html and "<form" not in html.split('id="content-main"')[1]
    assert "Quartermaster control plane</a>" in html  # the breadcrumb names the app as the index does


def test_the_page_follows_the_environment_as_the_api_does(fleet, browser) -> None:
    with override_settings(QM={**settings.QM, "PLACEMENT_POLICY": "spread", "FAIR_SHARE_HALF_LIFE_S": 3600.0,
                               "CYCLE_INTERVAL_S": 5.0}):
        rows = _rows(browser.get(PAGE).content.decode())
        api = client_for(fleet, "admin").get("/api/v1/scheduler/policy/").json()
    assert rows["placement_by_workload"][0].startswith("training: spread")
    assert api["engine"]["placement_by_workload"]["training"] == "spread"
    assert rows["fair_share_half_life_s"][0] == "3600" and api["engine"]["fair_share_half_life_s"] == 3600.0
    assert rows["cycle_interval_s"][0] == "5"


def test_every_setting_has_its_words(fleet) -> None:
    assert set(scheduler_policy.ENGINE_ABOUT) == {f.name for f in dataclasses.fields(scheduler_config())}
    assert set(scheduler_policy.LOOP_ABOUT) == set(scheduler_policy.LOOP_SETTINGS)


def _staff(username: str, *permissions: str) -> Client:
    """A staff user who may sign in to the admin, with only these permissions (codenames)."""
    user: Any = f.make_user(username)
    user.is_staff = True
    user.save()
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="controlplane",
                                                        codename__in=permissions))
    assert set(user.user_permissions.values_list("codename", flat=True)) == set(permissions)
    client = Client()
    assert client.login(username=username, password=username)
    return client


def test_a_staff_user_who_may_not_view_the_lease_is_refused_the_page(fleet) -> None:
    client = _staff("clerk")
    assert client.get(PAGE).status_code == 403
    assert "Scheduler policy" not in client.get("/admin/").content.decode()


def test_the_lease_permission_alone_does_not_show_the_policy(fleet) -> None:
    """The page has its own permission: seeing the lease row (who leads, its epoch) is not
    reading the policy. Until 7 Dec the page was gated by "Can view scheduler lease"."""
    client = _staff("leasewatcher", "view_schedulerlease")

    assert client.get(PAGE).status_code == 403
    assert "Scheduler policy" not in client.get("/admin/").content.decode()
    assert client.get("/admin/controlplane/schedulerlease/").status_code == 200  # the lease it may see


def test_the_policy_permission_alone_shows_the_page_and_its_index_entry(fleet) -> None:
    client = _staff("operator", "view_scheduler_policy")

    page = client.get(PAGE)
    index = client.get("/admin/").content.decode()

    assert page.status_code == 200
    assert "fair_share_half_life_s" in page.content.decode()
    assert f'<a href="{PAGE}">Scheduler policy</a>' in index
    assert client.get("/admin/controlplane/schedulerlease/").status_code == 403  # not the lease


def test_the_permission_is_said_in_words_a_group_admin_reads(fleet) -> None:
    permission = Permission.objects.get(content_type__app_label="controlplane", codename="view_scheduler_policy")
    assert permission.name == "Can view the scheduler policy"


def test_anonymous_is_sent_to_sign_in(fleet) -> None:
    r = Client().get(PAGE)

    assert r.status_code == 302
    assert r["Location"].startswith("/admin/login/?next=" + PAGE)
