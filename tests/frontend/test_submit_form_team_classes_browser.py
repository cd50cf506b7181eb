"""In Chromium: a member of two teams picks the team in the submit form, and the Priority class
list offers that team's classes only; a class picked that the other team may not use goes back
to "the team's default" (tests/frontend/test_forms_offer_the_teams_classes.py: what the server
offers). The form offered every class to everyone, and the submit refused those not the team's."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Job, Membership, Team
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _offered(page: Any) -> list[str]:
    return page.eval_on_selector_all(
        '#submit-job select[name="priority_class"] option',
        "options => options.filter(o => !o.hidden && !o.disabled).map(o => o.value)")


def test_the_class_list_follows_the_team_picked(session: Any) -> None:  # noqa: F811
    alice = session("alice")
    Membership.objects.create(user=user("alice"), team=Team.objects.get(name="serving"))  # every class
    alice.open("/jobs/")
    page = alice.page
    team = page.locator('#submit-job select[name="team"]')

    team.select_option("serving")
    assert _offered(page) == ["", "production", "research", "batch", "best-effort"]
    page.select_option('#submit-job select[name="priority_class"]', "production")

    team.select_option("vision")  # research, batch, best-effort only
    assert _offered(page) == ["", "research", "batch", "best-effort"]
    expect(page.locator('#submit-job select[name="priority_class"]')).to_have_value("")

    page.fill("[data-field=name]", "picked-for-vision")
    page.fill("[data-field=gpus]", "1")
    verdict = page.locator("#submit-job [data-verdict]")
    expect(verdict).to_contain_text("The submit would take it", timeout=LIVE_TIMEOUT_MS)
    page.click("#submit-job button[type=submit]")
    page.wait_for_url("**/jobs/*/")
    job = Job.objects.get(name="picked-for-vision")
    assert job.team.name == "vision" and job.priority_class.name == "research"  # vision's default
    assert alice.errors == []
