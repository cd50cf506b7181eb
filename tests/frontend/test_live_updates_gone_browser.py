"""In Chromium, a page whose job or node is gone (deleted, or the reader no longer in its team)
says so in plain words and stops polling: a 404 from its live endpoint does not pass, so asking
again every few seconds only repeats it. What the page showed stays, marked as no longer kept up.
Until 7 Dec the page said "Live updates paused (HTTP 404); retrying." and asked for ever. An
unreachable server still pauses and resumes (test_node_page_keeps_up_browser.py).

The polls run on Playwright's faked clock (tests/frontend/faked_clock.py): each request to the
live endpoint is seen at the instant the page made it, and "stops asking" is checked over ten
minutes of the page's time, not a second and a half of real time."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from controlplane.models import Membership, Node
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.faked_clock import LivePolls, install, utc
from tests.frontend.test_browser_pages import browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: The page's clock begins here; its round of polls is started again, paused, a minute on.
OPENED_AT = utc(2026, 12, 7, 10, 57, 0)
PAUSED_AT = OPENED_AT + timedelta(minutes=1)
NODE_JSON = "**/ui/nodes/a100-04.json*"
NODE_PACE_MS = 10_000  # the node page's (frontend/views/nodes.py live_every)
JOB_PACE_MS = 5_000  # a job page's (base.html's default)


def _open_on_the_clock(s: Any, path: str, endpoint: str, opened_at: datetime = OPENED_AT) -> LivePolls:
    install(s.page, opened_at)
    s.open(path)
    return LivePolls(s.page, endpoint, opened_at + timedelta(minutes=1))


def _assert_shown_as_stale(page: Any) -> None:
    regions = page.locator("[data-live-html]")
    assert regions.count() > 0
    for i in range(regions.count()):
        region = regions.nth(i)
        expect(region).to_have_class(re.compile(r"\blive-stale\b"))
        assert float(region.evaluate("el => getComputedStyle(el).opacity")) < 1  # seen, not only in the DOM


def test_a_deleted_nodes_page_says_it_is_gone_and_stops_asking(session: Any) -> None:  # noqa: F811
    admin = session("admin")
    polls = _open_on_the_clock(admin, "/nodes/a100-04/", NODE_JSON)
    page = admin.page
    expect(page.locator("#node-state .badge")).to_have_text("Ready")
    polls.run_for(NODE_PACE_MS, step_ms=NODE_PACE_MS)  # answered at 10:58:10

    Node.objects.filter(name="a100-04").delete()
    polls.run_for(NODE_PACE_MS, step_ms=NODE_PACE_MS)  # refused at 10:58:20

    banner = page.locator("#live-banner")
    expect(banner).to_have_text("Live updates stopped: No node is named 'a100-04'. What this page shows is "
                                "as it was at 10:58:10 UTC and is no longer kept up.")
    polls.run_for(600_000, step_ms=NODE_PACE_MS)  # ten minutes: sixty polls' worth at the page's pace
    assert polls.since(PAUSED_AT) == [10, 20], "asked again after the 404"
    expect(page.locator("#node-state .badge")).to_have_text("Ready")  # what was shown stays
    _assert_shown_as_stale(page)
    admin.screenshot("node-page-gone")
    admin.expect_refusal("/ui/nodes/a100-04.json", 404)


def test_a_job_page_whose_reader_left_the_team_says_it_is_no_longer_visible(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="left-behind", gpus=2, hold=True)).job
    alice = session("alice")
    polls = _open_on_the_clock(alice, f"/jobs/{job.pk}/", f"**/ui/jobs/{job.pk}.json*")
    page = alice.page

    Membership.objects.filter(user__username="alice").delete()
    polls.run_for(JOB_PACE_MS, step_ms=JOB_PACE_MS)  # refused at 10:58:05

    banner = page.locator("#live-banner")
    expect(banner).to_contain_text("Live updates stopped: No such job, or not yours to see.")
    polls.run_for(600_000, step_ms=JOB_PACE_MS)
    assert polls.since(PAUSED_AT) == [5], "asked again after the 404"
    expect(page.locator("h1")).to_contain_text("left-behind")
    _assert_shown_as_stale(page)
    alice.expect_refusal(f"/ui/jobs/{job.pk}.json", 404)


def test_an_unreachable_server_is_asked_again_less_and_less_often_then_as_before(session: Any) -> None:  # noqa: F811
    """A transient fault (the server out of reach, a 5xx) keeps being retried, each wait twice the
    last up to eight times the page's interval, not at full rate into a struggling server; the first
    answer brings back the page's own pace. On the faked clock the instants are exact: the node
    page's pace is 10 s, so after the failure at 20 s the waits are 20, 40, 80, then 80 s again."""
    admin = session("admin")
    polls = _open_on_the_clock(admin, "/nodes/a100-04/", NODE_JSON)
    page = admin.page
    banner = page.locator("#live-banner")
    assert polls.pace_ms == NODE_PACE_MS
    polls.run_for(10_000, step_ms=NODE_PACE_MS)
    assert polls.since(PAUSED_AT) == [10]
    expect(banner).to_have_count(0)

    polls.unreachable = True
    polls.run_for(20_000, step_ms=NODE_PACE_MS)
    expect(banner).to_have_text("Live updates paused (Failed to fetch); retrying.")
    polls.run_for(290_000, step_ms=NODE_PACE_MS)  # to 320 s
    assert polls.since(PAUSED_AT) == [10, 20, 40, 80, 160, 240, 320]
    assert polls.failed == [PAUSED_AT + timedelta(seconds=s) for s in (20, 40, 80, 160, 240, 320)]

    polls.unreachable = False
    polls.run_for(70_000, step_ms=NODE_PACE_MS)  # to 390 s: the 80 s wait is not over
    assert polls.since(PAUSED_AT)[-1] == 320
    expect(banner).to_be_visible()
    polls.run_for(30_000, step_ms=NODE_PACE_MS)  # to 420 s
    assert polls.since(PAUSED_AT) == [10, 20, 40, 80, 160, 240, 320, 400, 410, 420]
    expect(banner).to_be_hidden()
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
    polls = _open_on_the_clock(admin, "/nodes/a100-04/", NODE_JSON)
    page = admin.page
    expect(page.locator('[data-node-action="cordon"]')).to_be_enabled()

    Node.objects.filter(name="a100-04").delete()
    polls.run_for(NODE_PACE_MS, step_ms=NODE_PACE_MS)

    expect(page.locator("#live-banner")).to_contain_text("Live updates stopped")
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
    # The click's poll, counted on the body once it is over: the click's own `finally` (which
    # must leave the button closed) is chained on that poll and runs in the same microtask
    # checkpoint, so before Playwright's next look at the page. (Until 7 Dec: a 300 ms sleep.)
    page.evaluate("""() => {
        const poll = QM.poll;
        document.body.dataset.pollsOver = "0";
        QM.poll = () => poll().finally(() => {
            document.body.dataset.pollsOver = String(Number(document.body.dataset.pollsOver) + 1);
        });
    }""")
    Node.objects.filter(name="a100-04").delete()

    admin.act('[data-node-action="cordon"]', status=404)

    expect(page.locator("#live-banner")).to_contain_text("Live updates stopped")
    expect(page.locator("body")).to_have_attribute("data-polls-over", "1")
    _assert_closed(page, "[data-api-post]", "No node is named 'a100-04'.")
    admin.expect_refusal("/ui/nodes/a100-04.json", 404)
    admin.expect_refusal("/cordon/", 404)  # the click's own answer


def test_a_job_page_whose_reader_left_the_team_closes_its_actions(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="left-behind", gpus=2, hold=True)).job
    alice = session("alice")
    polls = _open_on_the_clock(alice, f"/jobs/{job.pk}/", f"**/ui/jobs/{job.pk}.json*")
    page = alice.page
    expect(page.locator("#cancel-job")).to_be_enabled()

    Membership.objects.filter(user__username="alice").delete()
    polls.run_for(JOB_PACE_MS, step_ms=JOB_PACE_MS)

    expect(page.locator("#live-banner")).to_contain_text("Live updates stopped")
    for selector in ("#cancel-job", "#release-job", '#change-job button[type="submit"]'):
        _assert_closed(page, selector, "No such job, or not yours to see.")
    alice.expect_refusal(f"/ui/jobs/{job.pk}.json", 404)
