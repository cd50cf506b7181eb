"""In Chromium, a page whose job or node is gone (deleted, or the reader no longer in its team)
says so in plain words and stops polling: a 404 from its live endpoint does not pass, so asking
again every few seconds only repeats it. What the page showed stays, marked as no longer kept up.
Until 7 Dec the page said "Live updates paused (HTTP 404); retrying." and asked for ever. An
unreachable server still pauses and resumes (test_node_page_keeps_up_browser.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Membership, Node
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: Polls every 200 ms from here on: the test sees in a second what ten polls would do.
POLL_FAST = "() => { QM.stop(); document.body.dataset.liveEvery = '200'; QM.start(); }"


def _polls_of(page: Any, path: str) -> list[str]:
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if path in request.url else None)
    return asked


def _assert_shown_as_stale(page: Any) -> None:
    regions = page.locator("[data-live-html]")
    assert regions.count() > 0
    for i in range(regions.count()):
        region = regions.nth(i)
        expect(region).to_have_class(re.compile(r"\blive-stale\b"))
        assert float(region.evaluate("el => getComputedStyle(el).opacity")) < 1  # seen, not only in the DOM


def test_a_deleted_nodes_page_says_it_is_gone_and_stops_asking(session: Any) -> None:  # noqa: F811
    admin = session("admin")
    admin.open("/nodes/a100-04/")
    page = admin.page
    expect(page.locator("#node-state .badge")).to_have_text("Ready")
    page.evaluate(POLL_FAST)
    asked = _polls_of(page, "/ui/nodes/a100-04.json")

    Node.objects.filter(name="a100-04").delete()

    banner = page.locator("#live-banner")
    expect(banner).to_contain_text("Live updates stopped: No node is named 'a100-04'.", timeout=LIVE_TIMEOUT_MS)
    expect(banner).to_contain_text("no longer kept up")
    expect(banner).not_to_contain_text("retrying")
    after_gone = len(asked)
    page.wait_for_timeout(1500)  # seven polls' worth
    assert len(asked) == after_gone, f"asked again after the 404: {asked[after_gone:]}"
    expect(page.locator("#node-state .badge")).to_have_text("Ready")  # what was shown stays
    _assert_shown_as_stale(page)
    admin.screenshot("node-page-gone")
    admin.expect_refusal("/ui/nodes/a100-04.json", 404)


def test_a_job_page_whose_reader_left_the_team_says_it_is_no_longer_visible(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="left-behind", gpus=2, hold=True)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    page.evaluate(POLL_FAST)
    asked = _polls_of(page, f"/ui/jobs/{job.pk}.json")

    Membership.objects.filter(user__username="alice").delete()

    banner = page.locator("#live-banner")
    expect(banner).to_contain_text("Live updates stopped: No such job, or not yours to see.", timeout=LIVE_TIMEOUT_MS)
    after_gone = len(asked)
    page.wait_for_timeout(1500)
    assert len(asked) == after_gone, f"asked again after the 404: {asked[after_gone:]}"
    expect(page.locator("h1")).to_contain_text("left-behind")
    _assert_shown_as_stale(page)
    alice.expect_refusal(f"/ui/jobs/{job.pk}.json", 404)


def test_an_unreachable_server_is_asked_again_less_and_less_often_then_as_before(session: Any) -> None:  # noqa: F811
    """A transient fault (the server out of reach, a 5xx) keeps being retried, each wait twice the
    last up to eight times the page's interval, not at full rate into a struggling server; the first
    answer brings back the page's own pace."""
    admin = session("admin")
    admin.open("/nodes/a100-04/")
    page = admin.page
    page.evaluate(POLL_FAST)
    asked = _polls_of(page, "/ui/nodes/a100-04.json")

    admin.context.set_offline(True)
    expect(page.locator("#live-banner")).to_contain_text("Live updates paused", timeout=LIVE_TIMEOUT_MS)
    start = len(asked)
    page.wait_for_timeout(4000)  # 20 polls at 200 ms; waits of 400, 800, 1600, 1600 ms: at most 5
    retried = len(asked) - start
    assert 2 <= retried <= 5, retried

    admin.context.set_offline(False)
    expect(page.locator("#live-banner")).to_be_hidden(timeout=LIVE_TIMEOUT_MS)
    start = len(asked)
    page.wait_for_timeout(2000)  # back at 200 ms: about 10
    assert len(asked) - start >= 6, len(asked) - start
    admin.errors = [e for e in admin.errors if "ERR_INTERNET_DISCONNECTED" not in e]


def _assert_closed(page: Any, selector: str, why: str) -> None:
    """An action on what is gone is disabled, and its title says why (a 404 is all it could get)."""
    buttons = page.locator(selector)
    assert buttons.count() > 0, selector
    for i in range(buttons.count()):
        expect(buttons.nth(i)).to_be_disabled()
        expect(buttons.nth(i)).to_have_attribute("title", re.compile(re.escape(why)))


def test_a_deleted_nodes_actions_are_closed_saying_why(session: Any) -> None:  # noqa: F811
    """Until 7 Dec the cordon and drain buttons of a node deleted under the page stayed active
    beside the "Live updates stopped" notice; a click got the API's 404."""
    admin = session("admin")
    admin.open("/nodes/a100-04/")
    page = admin.page
    expect(page.locator('[data-node-action="cordon"]')).to_be_enabled()
    page.evaluate(POLL_FAST)

    Node.objects.filter(name="a100-04").delete()

    expect(page.locator("#live-banner")).to_contain_text("Live updates stopped", timeout=LIVE_TIMEOUT_MS)
    for verb in ("cordon", "drain"):
        _assert_closed(page, f'[data-node-action="{verb}"]', "No node is named 'a100-04'.")
    expect(page.locator("#node-action-reason")).to_be_disabled()
    admin.expect_refusal("/ui/nodes/a100-04.json", 404)


def test_an_action_clicked_on_a_node_already_gone_leaves_it_closed(session: Any) -> None:  # noqa: F811
    """The 404 of the click itself leads to the poll that finds the node gone: the button the click
    had disabled while it was asking is not enabled again after."""
    admin = session("admin")
    admin.open("/nodes/a100-04/")
    page = admin.page
    page.evaluate("() => QM.stop()")  # no poll notices first: the click does
    Node.objects.filter(name="a100-04").delete()

    page.locator('[data-node-action="cordon"]').click()

    expect(page.locator("#live-banner")).to_contain_text("Live updates stopped", timeout=LIVE_TIMEOUT_MS)
    page.wait_for_timeout(300)  # past the click's own finally
    _assert_closed(page, "[data-api-post]", "No node is named 'a100-04'.")
    admin.expect_refusal("/ui/nodes/a100-04.json", 404)
    admin.expect_refusal("/cordon/", 404)  # the click's own answer


def test_a_job_page_whose_reader_left_the_team_closes_its_actions(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="left-behind", gpus=2, hold=True)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    expect(page.locator("#cancel-job")).to_be_enabled()
    page.evaluate(POLL_FAST)

    Membership.objects.filter(user__username="alice").delete()

    expect(page.locator("#live-banner")).to_contain_text("Live updates stopped", timeout=LIVE_TIMEOUT_MS)
    for selector in ("#cancel-job", "#release-job", '#change-job button[type="submit"]'):
        _assert_closed(page, selector, "No such job, or not yours to see.")
    alice.expect_refusal(f"/ui/jobs/{job.pk}.json", 404)
