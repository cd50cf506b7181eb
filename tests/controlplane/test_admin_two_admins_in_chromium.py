"""Two admins in real headless Chromium on one priority class and one team page: neither undoes
the other's save, and a team page whose quota row was deleted meanwhile saves without it, saying so.

What the admin saw before (demo, two browser windows on /admin/): the second save wrote its whole
stale form back ("value 510 → 490, grace_period_s 600 → 30" under the second admin's name), and a
team page whose quota another admin had deleted answered "Please correct the error below." with
no error on the page (the row was not shown again), and saved nothing until reloaded.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from controlplane.choices import EventKind
from controlplane.models import Event, PriorityClass, Quota, Team
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import build_fleet

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Browser]:
    # Playwright's sync API runs an asyncio loop in this thread; Django's guard against database
    # calls from "async context" is lifted for this module only (as in tests/frontend).
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def admins(chromium: Browser, live_server: Any) -> Iterator[tuple[Page, Page]]:
    build_fleet()
    pages = []
    for name in ("boss", "carol"):
        f.make_user(name, superuser=True)
        page = chromium.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(live_server.url + "/admin/login/")
        page.fill("input[name=username]", name)
        page.fill("input[name=password]", name)
        page.click("input[type=submit]")
        page.wait_for_url(live_server.url + "/admin/")
        pages.append(page)
    yield pages[0], pages[1]
    for page in pages:
        page.context.close()


def test_two_admins_on_one_priority_class(admins, live_server) -> None:
    boss, carol = admins
    research = PriorityClass.objects.get(name="research")
    path = f"{live_server.url}/admin/controlplane/priorityclass/{research.pk}/change/"
    boss.goto(path)
    carol.goto(path)
    carol.fill("#id_grace_period_s", "600")
    carol.fill("#id_value", "510")
    carol.click("input[name=_save]")
    carol.wait_for_selector(".messagelist .success")

    boss.fill("#id_preemption_budget", "1")
    boss.fill("#id_value", "490")
    boss.click("input[name=_save]")

    error = boss.inner_text(".field-value .errorlist")
    assert error.startswith("user:carol changed this from 100 to 510 since you opened this page; your 490 was not saved.")
    assert boss.input_value("#id_value") == "510" and boss.input_value("#id_grace_period_s") == "600"
    stored = PriorityClass.objects.get(pk=research.pk)
    assert (stored.value, stored.grace_period_s, stored.preemption_budget) == (510, 600, 3)

    boss.click("input[name=_save]")  # the page now shows what is stored: saving it is a decision
    boss.wait_for_selector(".messagelist .success")
    stored = PriorityClass.objects.get(pk=research.pk)
    assert (stored.value, stored.grace_period_s, stored.preemption_budget) == (510, 600, 1)
    mine = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, actor="user:boss").get()
    assert mine.message == "Priority class research changed: preemption budget 3 → 1"


def test_a_team_page_whose_quota_row_was_deleted_meanwhile(admins, live_server) -> None:
    boss, carol = admins
    ml = Team.objects.get(name="ml")
    quota = ml.quotas.get()
    boss.goto(f"{live_server.url}/admin/controlplane/team/{ml.pk}/change/")
    carol.goto(f"{live_server.url}/admin/controlplane/quota/{quota.pk}/delete/")
    carol.click("input[type=submit]")
    carol.wait_for_selector(".messagelist .success")

    boss.fill("#id_description", "machine learning")
    boss.click("input[name=_save]")

    boss.wait_for_selector(".messagelist .success")
    warning = boss.text_content(".messagelist .warning").strip()  # the text, not as CSS capitalises it
    assert warning.startswith("Quota ml × H100-80GB: 16 was deleted by user:carol since you opened this page")
    assert Team.objects.get(pk=ml.pk).description == "machine learning"
    assert not Quota.objects.filter(team=ml).exists()
