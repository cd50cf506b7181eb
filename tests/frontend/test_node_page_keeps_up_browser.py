"""In Chromium, a node's page left open keeps up by itself, as the overview and a job's page do:
what changes on the server (an operator cordons the node with a reason, the scheduler binds a
job to its GPUs, its agent heartbeats) shows without a reload, within its refresh interval;
the state change is said in the page's polite status; an unreachable server pauses the updates
with the shared notice, and the next answer takes it away. The page's own refresh runs on
Playwright's faked clock (tests/frontend/faked_clock.py): it comes at its 10 s pace exactly,
without the test waiting those seconds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import JobState
from controlplane.models import Node
from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from controlplane.services.nodes import cordon, uncordon
from tests.frontend.faked_clock import LivePolls, install, utc
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WATCHED = "a100-04"
OPENED_AT = utc(2026, 12, 7, 10, 57, 0)
PAUSED_AT = OPENED_AT + timedelta(minutes=1)


def test_a_node_page_shows_a_cordon_a_bound_job_and_a_heartbeat_without_a_reload(session: Any) -> None:  # noqa: F811
    # The other A100 nodes take no work, so the job below can only land on the watched one.
    for other in Node.objects.filter(pool="a100").exclude(name=WATCHED):
        cordon(other, user("admin"), reason="kept out of this test")
    Node.objects.filter(name=WATCHED).update(last_heartbeat_at=timezone.now() - timedelta(minutes=30))
    admin = session("admin")
    install(admin.page, OPENED_AT)
    admin.open(f"/nodes/{WATCHED}/")
    page = admin.page
    polls = LivePolls(page, f"**/ui/nodes/{WATCHED}.json*", PAUSED_AT)
    state = page.locator("#node-state .badge")
    heartbeat = page.locator("#node-status-heading ~ dl.facts dt", has_text="Heartbeat").locator(
        "xpath=following-sibling::dd[1]")
    holders = page.locator("table.holders")
    events = page.locator("table.events")
    expect(state).to_have_text("Ready")
    expect(heartbeat).to_contain_text("30 min ago")
    expect(page.locator("[data-live-html=node-status]")).to_contain_text("No job holds a GPU of this node now.")
    page.evaluate("window.__notReloaded = true")

    # Elsewhere: a job is bound to its GPUs, its agent heartbeats, an operator cordons it.
    job = submit(user("alice"), SubmitRequest(name="watched-run", gpus=8, gpu_types=("A100-40GB",))).job
    run_cycle("test")
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    node = Node.objects.get(name=WATCHED)
    Node.objects.filter(pk=node.pk).update(last_heartbeat_at=timezone.now())
    cordon(node, user("admin"), reason="PSU fault, ticket 4411")

    # No poll asked for: the page's own refresh brings it, 10 s on.
    polls.run_for(9_000, step_ms=1_000)
    assert polls.since(PAUSED_AT) == []
    expect(state).to_have_text("Ready")
    polls.run_for(1_000, step_ms=1_000)
    assert polls.since(PAUSED_AT) == [10]
    expect(state).to_have_text("Cordoned")
    expect(page.locator("#node-cordon-reason")).to_have_text("PSU fault, ticket 4411")
    expect(heartbeat).to_contain_text(" s ago")
    holder = holders.locator(f'a[href="/jobs/{job.pk}/"]')
    expect(holder).to_have_text(str(job.pk))
    expect(holders).to_contain_text("watched-run")
    expect(holders.locator("tbody tr td").last).to_have_text("0, 1, 2, 3, 4, 5, 6, 7")
    expect(events).to_contain_text("PSU fault, ticket 4411")
    expect(page.locator("#live-said")).to_have_text(f"Node {WATCHED}: Cordoned")
    assert page.evaluate("window.__notReloaded") is True

    # The server out of reach: updates pause with the shared notice, and resume.
    admin.context.set_offline(True)
    page.evaluate("() => QM.poll()")
    expect(page.locator("#live-banner")).to_contain_text("Live updates paused", timeout=LIVE_TIMEOUT_MS)
    expect(state).to_have_text("Cordoned")  # what was shown stays
    admin.context.set_offline(False)
    page.evaluate("() => QM.poll()")
    expect(page.locator("#live-banner")).to_be_hidden(timeout=LIVE_TIMEOUT_MS)
    admin.errors = [e for e in admin.errors if "ERR_INTERNET_DISCONNECTED" not in e]


def test_a_cordon_notice_goes_once_the_node_has_moved_on(session: Any) -> None:  # noqa: F811
    """As on a job's page: the notice an action left ("a100-04: ready → cordoned: no new work goes
    there; ...") speaks of the node as the action left it, and goes once a live update shows it
    otherwise (uncordoned by another operator); it stood above the Ready badge until a reload."""
    admin = session("admin")
    admin.open(f"/nodes/{WATCHED}/")
    page = admin.page
    notice = page.locator("#action-result")

    page.click("[data-node-action=cordon]")

    expect(notice).to_have_text(f"{WATCHED}: ready → cordoned: no new work goes there; nothing runs there.",
                                timeout=LIVE_TIMEOUT_MS)
    expect(page.locator("#node-state .badge")).to_have_text("Cordoned", timeout=LIVE_TIMEOUT_MS)
    page.evaluate("() => QM.poll()")
    expect(notice).to_be_visible()  # the state still bears it out

    uncordon(Node.objects.get(name=WATCHED), user("admin"))
    page.evaluate("() => QM.poll()")
    expect(page.locator("#node-state .badge")).to_have_text("Ready", timeout=LIVE_TIMEOUT_MS)
    expect(notice).to_be_hidden()
