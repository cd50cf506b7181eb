"""The pages in a real browser: Debian's headless Chromium, driven by Playwright, against a live
server on the test PostgreSQL. Screenshots of every page go to test-artifacts/screenshots/."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from playwright.sync_api import Browser, ConsoleMessage, Locator, Page, Response, expect, sync_playwright

from controlplane.choices import JobState, NodeState
from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import Job, Node
from controlplane.services import accounting
from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.faked_clock import LivePolls
from tests.frontend.page_data import preempted_event, sample

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
# A live update arrives within one polling interval (5 s on the job page) plus the request; an
# answer to a form (its debounced check, a submit) within the request. Both from a live server
# beside a browser on a machine that may be running the rest of the suite: generous, since
# each wait ends as soon as the page shows what it waits for (12 s and 5 s before 6 Dec).
LIVE_TIMEOUT_MS = 30_000
ANSWER_TIMEOUT_MS = 30_000
#: Where a session's sign-in lands (Session.login): the sign-in page again, the cheapest page.
SIGNED_IN = "/accounts/login/"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Playwright's sync API keeps an asyncio loop running in this thread, and Django then refuses
    # database calls from it as "async context". The tests' own database calls are synchronous and
    # never overlap the loop's work, so lift the guard for this module only, and restore it after.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


class Session:
    """One signed-in browser tab that records every console error and uncaught exception."""

    def __init__(self, browser: Browser, base: str, timezone_id: str | None = None) -> None:
        self.base = base
        # The reader's time zone (Chromium's own if None): the pages say UTC whatever it is.
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000}, timezone_id=timezone_id)
        self.page: Page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda exc: self.errors.append(f"uncaught: {exc}"))
        self.page.on("dialog", lambda dialog: dialog.accept())

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} at {message.location}")

    def act(self, button: str | Locator, status: int = 200) -> Response:
        """Press an action's button (a `data-api-post` button: qm.js bindActions) and wait for the
        API's answer to it, its status checked, and then, unless the API refused it as invalid
        (400: nothing changed), for the page's refresh the action asks for (QM.poll, the page's
        live endpoint): what the page shows of the action is on it once both answered, so the
        test's next look needs no live timeout, and an answer other than `status` fails here
        at once, saying so, where a 30 s wait on the page's words failed before (until 7 Dec)."""
        pressed = self.page.locator(button) if isinstance(button, str) else button
        api = pressed.get_attribute("data-api-post")
        assert api, f"{button} calls no API"
        live = urlsplit(self.page.evaluate("() => document.body.dataset.liveUrl || ''")).path

        def answers(response: Response) -> bool:
            return response.request.method == "POST" and urlsplit(response.url).path == api

        def refreshes(response: Response) -> bool:
            return response.request.method == "GET" and urlsplit(response.url).path == live

        if status == 400 or not live:
            with self.page.expect_response(answers, timeout=ANSWER_TIMEOUT_MS) as answer:
                pressed.click()
        else:
            with self.page.expect_response(refreshes, timeout=LIVE_TIMEOUT_MS), \
                    self.page.expect_response(answers, timeout=ANSWER_TIMEOUT_MS) as answer:
                pressed.click()
        assert answer.value.status == status, f"{api}: HTTP {answer.value.status} {answer.value.text()[:300]}"
        return answer.value

    def expect_refusal(self, path: str, status: int) -> None:
        """Forget the console line Chromium logs for an HTTP error the test itself provoked."""
        self.errors = [e for e in self.errors if not (f"status of {status}" in e and path in e)]

    def login(self, username: str) -> None:
        """Sign in through the page's form, as a user does, landing back on the sign-in page
        (``next``) rather than the overview: every test opens the pages it is about, and the
        overview drawn after each sign-in and left at once cost 1.0-1.4 s after its redirect, at
        a load of 4 (105 sign-ins a run; this file took 91-99 s against 106-135 s, side by side,
        6 Dec). The form's answer must be the sign-in's redirect, so a refused sign-in fails
        here, not at the test's first page."""
        self.page.goto(self.base + "/accounts/login/?next=" + SIGNED_IN)
        self.page.fill("input[name=username]", username)
        self.page.fill("input[name=password]", username)
        with self.page.expect_response(lambda r: r.request.method == "POST") as answer:
            self.page.click("button[type=submit]")
        signed_in = (answer.value.status, answer.value.headers.get("location"))
        assert signed_in == (302, SIGNED_IN), f"{username} not signed in: {signed_in}"
        self.page.wait_for_url(self.base + SIGNED_IN)

    def open(self, path: str) -> Any:
        response = self.page.goto(self.base + path)
        self.page.wait_for_selector("body[data-charts-ready=true]", timeout=20_000)
        return response

    def replay(self) -> None:
        """Press the what-if form's Replay (a POST) and wait for the page it redirects to, which
        follows the replay to its comparison."""
        with self.page.expect_navigation(url=re.compile(r"/what-if/\?.*key=")):
            self.page.click("#what-if-form button[type=submit]")
        self.page.wait_for_selector("[data-replay=done]", timeout=90_000)
        self.page.wait_for_function(
            "[...document.querySelectorAll('[data-chart]')].every(b => b.dataset.rendered)", timeout=10_000)

    def screenshot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)

    def assert_charts_rendered(self) -> int:
        """Every chart box drew a plot (plotly's SVG is there) or shows its empty state."""
        boxes = self.page.locator("[data-chart]")
        for i in range(boxes.count()):
            box = boxes.nth(i)
            key = box.get_attribute("data-chart")
            rendered = box.get_attribute("data-rendered")
            assert rendered in ("plot", "empty"), f"chart {key} did not render ({rendered})"
            if rendered == "plot":
                assert box.locator(".main-svg").count() > 0, f"chart {key} has no plotly SVG"
            else:
                assert box.locator(".empty p").inner_text().strip(), f"chart {key} is empty without a word"
        return boxes.count()


@pytest.fixture
def session(browser: Browser, live_server: Any) -> Iterator[Any]:
    seed_demo_fleet()
    opened: list[Session] = []

    def make(username: str, timezone_id: str | None = None) -> Session:
        s = Session(browser, live_server.url, timezone_id)
        s.login(username)
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.context.close()
    for s in opened:
        assert not s.errors, s.errors


def user(name: str) -> Any:
    return get_user_model().objects.get(username=name)


def test_member_submits_a_job_through_the_form_and_watches_it_start(session):
    alice = session("alice")
    # On the faked clock (tests/frontend/faked_clock.py): the job page's own refresh, 5 s on,
    # brings the start, without the test waiting those seconds.
    opened_at = datetime(2026, 12, 7, 10, 57, 0, tzinfo=UTC)
    alice.page.clock.install(time=opened_at)
    alice.open("/jobs/")
    alice.page.fill("[data-field=name]", "browser-train")
    alice.page.fill("[data-field=gpus]", "8")
    expect(alice.page.locator("[data-verdict]")).to_contain_text("This fleet can run 8 GPUs", timeout=ANSWER_TIMEOUT_MS)
    alice.page.click("#submit-job button[type=submit]")
    alice.page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    alice.page.wait_for_selector("body[data-charts-ready=true]")
    job = Job.objects.get(name="browser-train")
    assert job.team.name == "vision" and job.submitter.username == "alice"
    expect(alice.page.locator("#job-state .badge")).to_have_text("Pending")
    expect(alice.page.locator("#why-waiting")).to_contain_text("Waiting for the next scheduling cycle")
    alice.page.evaluate("window.__notReloaded = true")
    polls = LivePolls(alice.page, f"**/ui/jobs/{job.pk}.json*", opened_at + timedelta(minutes=1))

    run_cycle("test")
    polls.run_for(5_000, step_ms=5_000)

    expect(alice.page.locator("#job-state .badge")).to_have_text("Running")
    expect(alice.page.locator("[data-chart=placement]")).to_have_attribute("data-rendered", "plot")
    assert alice.page.evaluate("window.__notReloaded") is True, "the page reloaded instead of updating live"
    assert alice.page.locator("[data-chart=timeline] .main-svg").count() > 0
    alice.screenshot("job-running")


def test_live_validation_says_at_once_why_a_shape_can_never_run(session):
    alice = session("alice")
    alice.open("/jobs/")
    alice.page.fill("[data-field=name]", "too-wide")
    alice.page.fill("[data-field=gpus]", "16")
    alice.page.fill("[data-field=gpus_per_node]", "16")
    verdict = alice.page.locator("[data-verdict]")
    expect(verdict).to_contain_text("can never run on this fleet", timeout=ANSWER_TIMEOUT_MS)
    expect(alice.page.locator("[data-error-for=gpus_per_node]")).to_contain_text("the largest node has 8")
    expect(alice.page.locator("[data-field=gpus_per_node]")).to_have_attribute("aria-invalid", "true")
    alice.screenshot("jobs-live-validation")
    # Submitting anyway: the API refuses with the same reason, shown in place; nothing is stored.
    alice.page.click("#submit-job button[type=submit]")
    expect(verdict).to_contain_text("largest node has 8", timeout=ANSWER_TIMEOUT_MS)
    assert not Job.objects.filter(name="too-wide").exists()
    alice.expect_refusal("/api/v1/jobs/", 400)


def test_live_validation_names_zero_gpus_and_forgets_errors_of_a_cleared_field(session):
    alice = session("alice")
    alice.open("/jobs/")
    alice.page.fill("[data-field=name]", "nothing")
    gpus_error = alice.page.locator("[data-error-for=gpus]")
    verdict = alice.page.locator("[data-verdict]")
    # 0 is a number the user typed, not an empty field: it is checked like any other.
    alice.page.fill("[data-field=gpus]", "0")
    expect(gpus_error).to_contain_text("a job needs at least 1 GPU", timeout=ANSWER_TIMEOUT_MS)
    expect(verdict).to_contain_text("GPUs: ")  # the field's label, as the form says it
    # Emptied, the field says nothing any more: neither the old error nor the old verdict stays.
    alice.page.fill("[data-field=gpus]", "")
    expect(gpus_error).to_be_hidden(timeout=ANSWER_TIMEOUT_MS)
    expect(verdict).to_have_text("")
    expect(alice.page.locator("[data-field=gpus]")).not_to_have_attribute("aria-invalid", "true")


def submit_beyond_the_class_maximum(alice: Any, name: str, opened: bool = False) -> None:
    """Fill the form with a runtime limit the class refuses and submit it at once."""
    if not opened:
        alice.open("/jobs/")
    alice.page.fill("[data-field=name]", name)
    alice.page.fill("[data-field=gpus]", "1")
    alice.page.select_option("[data-field=priority_class]", "best-effort")
    alice.page.fill("[data-field=runtime_limit_s]", "48")  # hours; best-effort allows 24
    alice.page.click("#submit-job button[type=submit]")


def test_submit_errors_from_the_api_are_shown_on_their_fields(session):
    alice = session("alice")
    submit_beyond_the_class_maximum(alice, "too-long")
    expect(alice.page.locator("[data-error-for=runtime_limit_s]")).to_contain_text("beyond the maximum",
                                                                                   timeout=ANSWER_TIMEOUT_MS)
    assert not Job.objects.filter(name="too-long").exists()
    alice.expect_refusal("/api/v1/jobs/", 400)


def test_a_live_check_answering_after_the_submit_leaves_the_submits_errors(session):
    # Submitted within the live check's 250 ms debounce: the check fires after the submit and,
    # not knowing the class's runtime maximum, used to wipe the submit's error off the field.
    # On the faked clock, paused before the fields are typed: the check's 250 ms have not passed
    # when the submit goes, and ten seconds after its answer no check has gone and none wiped it.
    alice = session("alice")
    opened_at = datetime(2026, 12, 7, 10, 57, 0, tzinfo=UTC)
    alice.page.clock.install(time=opened_at)
    checks: list[str] = []
    alice.page.on("request", lambda request: checks.append(request.url) if "/ui/jobs/check.json" in request.url
                  else None)
    alice.open("/jobs/")
    alice.page.clock.pause_at(opened_at + timedelta(minutes=1))
    submit_beyond_the_class_maximum(alice, "too-long-2", opened=True)
    error = alice.page.locator("[data-error-for=runtime_limit_s]")
    expect(error).to_contain_text("beyond the maximum", timeout=ANSWER_TIMEOUT_MS)
    alice.page.clock.run_for(10_000)  # long after the debounced check would have gone
    expect(error).to_contain_text("beyond the maximum", timeout=100)
    assert checks == [], "a live check went after the submit"
    alice.expect_refusal("/api/v1/jobs/", 400)


def test_job_array_is_submitted_through_the_form(session):
    alice = session("alice")
    alice.open("/jobs/")
    alice.page.fill("[data-field=name]", "sweep")
    alice.page.fill("[data-field=gpus]", "1")
    alice.page.fill("[data-field=array]", "0-9")
    expect(alice.page.locator("[data-verdict]")).to_contain_text("10 tasks", timeout=ANSWER_TIMEOUT_MS)
    alice.page.click("#submit-job button[type=submit]")
    alice.page.wait_for_url(re.compile(r".*/jobs/\?array_id=[0-9a-f-]+$"))
    expect(alice.page.locator(".array-summary")).to_contain_text("10")
    assert Job.objects.filter(name="sweep").count() == 10
    assert alice.page.locator("table.jobs tbody tr").count() == 10


def test_waiting_job_shows_why_in_words_with_numbers(session):
    alice = session("alice")
    # vision may hold 40 H100 GPUs plus 32 borrowed: 96 can never be admitted under its quota now.
    job = submit(user("alice"), SubmitRequest(name="too-big-for-quota", gpus=96, gpu_types=("H100-80GB",))).job
    run_cycle("test")
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.pending_code
    alice.open(f"/jobs/{job.pk}/")
    why = alice.page.locator("#why-waiting")
    expect(why).to_contain_text(job.pending_code)
    expect(why).to_contain_text(job.pending_message[:60])
    assert re.search(r"\d", why.locator(".reason-text").inner_text()), "the reason carries no number"
    alice.screenshot("job-waiting")


def test_member_cannot_open_another_teams_job(session):
    bob_job = submit(user("bob"), SubmitRequest(name="language-secret", gpus=1)).job
    alice = session("alice")
    response = alice.page.goto(alice.base + f"/jobs/{bob_job.pk}/")
    assert response.status == 404
    assert "language-secret" not in alice.page.content()
    alice.expect_refusal(f"/jobs/{bob_job.pk}/", 404)


def test_member_cancels_a_waiting_job_from_its_page(session):
    job = submit(user("alice"), SubmitRequest(name="to-cancel", gpus=1)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    alice.act("#cancel-job")
    expect(alice.page.locator("#job-state .badge")).to_have_text("Cancelled")
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED


def test_admin_cordons_and_uncordons_a_node(session):
    admin = session("admin")
    admin.open("/nodes/")
    row = admin.page.locator('tr[data-node="h100-03"]')
    admin.act(row.locator("[data-node-action=cordon]"))
    expect(row.locator(".node-state .badge")).to_have_text("Cordoned")
    assert Node.objects.get(name="h100-03").state == NodeState.CORDONED
    admin.act(row.locator("[data-node-action=uncordon]"))
    expect(row.locator(".node-state .badge")).to_have_text("Ready")
    assert Node.objects.get(name="h100-03").state == NodeState.READY


def test_admin_opens_a_node_from_the_list_and_cordons_it_there(session):
    admin = session("admin")
    admin.open("/nodes/")
    admin.page.click('tr[data-node="h100-03"] a')
    admin.page.wait_for_url(admin.base + "/nodes/h100-03/")
    admin.page.wait_for_selector("body[data-charts-ready=true]")
    assert admin.assert_charts_rendered() == 2  # its GPU slots, and its GPU time in three tiers
    admin.act("[data-node-action=cordon]")
    expect(admin.page.locator("#node-state .badge")).to_have_text("Cordoned")
    expect(admin.page.locator("table.events")).to_contain_text("cordon by admin")
    assert Node.objects.get(name="h100-03").state == NodeState.CORDONED
    admin.screenshot("node")


#: From now on, each navigation the page begins (the Navigation API's `navigate` event, fired as a
#: form's submission or a location change starts, before its request goes out) and each `change`
#: event once the page's own handlers had it (a listener on the document, where it bubbles last):
#: a picker's arrow key is over when its change is counted, and sent the page nowhere if no
#: navigation began by the turn of the event loop after. (Until 7 Dec the tests slept 300 ms and looked at the URL.)
WATCH_NAVIGATION = """() => {
  window.__navigations = [];
  window.__changes = 0;
  navigation.addEventListener('navigate', event => window.__navigations.push(event.destination.url));
  document.addEventListener('change', () => { window.__changes += 1; });
}"""

#: The navigations begun, a frame and a task after now: a form's submission begins in a task of
#: its own, queued as `submit()` is called. (A navigation begun ends this page's scripts: the
#: evaluate fails, and so does the test.)
NAVIGATIONS_A_TURN_LATER = "() => new Promise(r => requestAnimationFrame(() => setTimeout(() => r(window.__navigations))))"


def test_a_keyboard_reaches_any_window_and_applies_it_with_enter(session):
    """Arrow keys on a picker that applied on every change sent the page away at the first
    arrow (24 hours → 7 days), with the focus lost: 30 days could not be reached by keyboard.
    Arrows now move through the options; Enter (or leaving the field) applies; a click applies
    at once as before."""
    alice = session("alice")
    for path in ("/", "/teams/"):
        alice.open(path)
        picker = alice.page.locator("select[name=window]")
        picker.focus()
        before = picker.input_value()
        alice.page.evaluate(WATCH_NAVIGATION)
        alice.page.keyboard.press("ArrowDown")
        alice.page.wait_for_function("() => window.__changes === 1", timeout=ANSWER_TIMEOUT_MS)
        assert alice.page.evaluate(NAVIGATIONS_A_TURN_LATER) == [], "the first arrow navigated away"
        assert alice.page.url == alice.base + path
        while picker.input_value() != "30d":
            alice.page.keyboard.press("ArrowDown")
        assert picker.input_value() != before
        with alice.page.expect_navigation():
            alice.page.keyboard.press("Enter")
        assert "window=30d" in alice.page.url
    alice.open("/")
    with alice.page.expect_navigation():
        alice.page.select_option("select[name=team]", "vision")  # a pointer's choice applies at once
    assert "team=vision" in alice.page.url


def test_overview_updates_live_without_a_reload(session):
    """The tiles count the queue as it is (no cycle runs here: submitted jobs stay pending)."""
    for i in range(2):
        submit(user("bob"), SubmitRequest(name=f"first-{i}", gpus=1))
    admin = session("admin")
    admin.open("/")
    expect(admin.page.locator("[data-live=pending_jobs]")).to_have_text("2")
    admin.page.evaluate("window.__notReloaded = true")
    for i in range(15):
        submit(user("bob"), SubmitRequest(name=f"later-{i}", gpus=1))
    expect(admin.page.locator("[data-live=pending_jobs]")).to_have_text("17", timeout=LIVE_TIMEOUT_MS)
    assert admin.page.evaluate("window.__notReloaded") is True


def test_utilization_definitions_are_one_click_away(session):
    alice = session("alice")
    alice.open("/")
    definitions = alice.page.locator("#utilization-definitions")
    expect(definitions.locator("dl")).to_be_hidden()
    definitions.locator("summary").click()
    expect(definitions.locator("dl")).to_be_visible()
    expect(definitions).to_contain_text("Productive")


def test_tile_definitions_are_one_click_away_by_keyboard(session):
    # A title attribute (where three tiles' terms were) is reached by neither keyboard nor touch.
    alice = session("alice")
    alice.open("/")
    definitions = alice.page.locator("#tile-definitions")
    expect(definitions.locator("dl")).to_be_hidden()
    definitions.locator("summary").focus()
    alice.page.keyboard.press("Enter")
    expect(definitions.locator("dl")).to_be_visible()
    for term in ("Away", "Stranded GPUs", "Oldest feasible job waits", "Nodes not answering"):
        expect(definitions.locator("dt", has_text=term)).to_be_visible()
    assert alice.page.locator(".tiles .tile[title]").count() == 0


def fill_the_fleet() -> Job:
    """A busy fleet: jobs of every team running and waiting, a preemption today, an hour of samples."""
    for i in range(4):
        submit(user("alice"), SubmitRequest(name=f"vision-{i}", gpus=8, gpu_types=("H100-80GB",)))
    for i in range(3):
        submit(user("bob"), SubmitRequest(name=f"language-{i}", gpus=4))
    submit(user("bob"), SubmitRequest(name="language-wide", gpus=64, gpus_per_node=8))
    now = timezone.now()
    run_cycle("test", now=now - timedelta(hours=1))
    accounting.catch_up(now)
    for i in range(60):
        sample(now - timedelta(minutes=59 - i), allocated_gpus=40 + i, stranded_gpus=i % 7,
               pending_by_priority={"research": 1 + i % 4, "batch": i % 3},
               pending_by_team={"vision": i % 3, "language": 1 + i % 4})
    job = Job.objects.filter(state=JobState.RUNNING, team__name="vision").order_by("pk").first()
    preempted_event(job, now, 1800.0)
    return job


def test_what_if_replays_another_quota_table_typed_in_the_form(session):
    admin = session("admin")
    submit(user("alice"), SubmitRequest(name="gang", gpus=8, gpu_types=("H100-80GB",)))
    admin.open("/what-if/")
    admin.page.click(".quota-table summary")
    cell = admin.page.locator("input[name='quota:vision:H100-80GB']")
    expect(cell).to_have_value("40")  # prefilled with the live quota
    cell.fill("500")  # the browser itself refuses more than the fleet's GPUs of the type
    assert cell.evaluate("e => e.validity.rangeOverflow") is True
    # and the server, asked directly, answers 400 naming the cell
    response = admin.page.goto(admin.base + "/what-if/?days=1&quota%3Avision%3AH100-80GB=500")
    assert response.status == 400
    admin.expect_refusal("/what-if/", 400)
    expect(admin.page.locator("#what-if-errors [data-field='quota:vision:H100-80GB']")).to_contain_text(
        "quota of vision on H100-80GB: expected 0 to 96")
    expect(admin.page.locator("input[name='quota:vision:H100-80GB']")).to_have_attribute("aria-invalid", "true")
    admin.page.locator("input[name='quota:vision:H100-80GB']").fill("64")
    posted = []
    admin.page.on("request", lambda r: posted.append(r.method) if r.url.endswith("/what-if/") else None)
    admin.replay()  # a POST with the page's CSRF token, redirected to the replay's GET
    assert posted == ["POST"], posted
    expect(admin.page.locator("#what-if-result table.compare thead")).to_contain_text(
        "quotas changed: vision H100-80GB 40 → 64")
    assert admin.assert_charts_rendered() == 6
    admin.screenshot("what-if-quotas")


def test_every_page_renders_each_chart_with_no_console_errors(session):
    job = fill_the_fleet()
    pages = {
        "overview": "/",
        "jobs": "/jobs/",
        "job": f"/jobs/{job.pk}/",
        "teams": "/teams/",
        "showback": "/showback/?window=24h",
        "nodes": "/nodes/",
        "what-if": "/what-if/?days=1&placement=spread&backfill=on&preemption=on",
    }
    admin = session("admin")
    drawn = {}
    for name, path in pages.items():
        response = admin.open(path)
        assert response.status == 200, f"{path}: HTTP {response.status}"
        if name == "what-if":  # Replay starts it (a POST); the page it redirects to follows it live
            admin.replay()
        drawn[name] = admin.assert_charts_rendered()
        admin.screenshot(name)
        assert not admin.errors, f"{path}: {admin.errors}"
    assert drawn["overview"] == 6 and drawn["job"] == 2 and drawn["what-if"] == 6
    assert drawn["teams"] >= 6 and drawn["nodes"] == 1 and drawn["showback"] == 4
    alice = session("alice")
    for name, path in (("overview-member", "/"), ("teams-member", "/teams/"), ("showback-member", "/showback/")):
        alice.open(path)
        alice.assert_charts_rendered()
        alice.screenshot(name)
    finn = session("finn")
    finn.open("/jobs/")
    finn.screenshot("jobs-finance")
    finn.open("/showback/?window=24h&group_by=project")
    finn.assert_charts_rendered()
    finn.screenshot("showback-finance-by-project")


def test_no_page_scrolls_sideways_on_a_tablet(session):
    """At 768 px the wide tables scroll inside their panel; the page itself never does."""
    fill_the_fleet()  # its accounting has caught up: the showback table has every column filled
    finn = session("finn")
    finn.page.set_viewport_size({"width": 768, "height": 1000})
    for path in ("/", "/teams/", "/showback/?window=24h", "/showback/?window=24h&group_by=project", "/nodes/"):
        finn.open(path)
        width = finn.page.evaluate("document.documentElement.scrollWidth")
        assert width <= 768, f"{path} is {width} px wide at 768 px"
    finn.screenshot("showback-tablet")


@pytest.mark.parametrize("width", [390, 820], ids=["phone", "tablet"])
def test_no_page_scrolls_sideways_on_a_phone_or_tablet(session, width):
    """On a phone the charts, the tiles and the submit form fit the screen (two-column grids fall
    to one, labels sit above their fields), the top bar wraps, and the wide tables (jobs, events,
    nodes, teams, the what-if quota table) scroll inside their own box; the page never does."""
    job = fill_the_fleet()
    admin = session("admin")
    admin.page.set_viewport_size({"width": width, "height": 900})
    for path in ("/", "/jobs/", f"/jobs/{job.pk}/", "/teams/", "/nodes/", "/nodes/h100-01/", "/what-if/"):
        admin.open(path)
        if path == "/what-if/":
            admin.page.click(".quota-table summary")
        page_width = admin.page.evaluate("document.documentElement.scrollWidth")
        assert page_width <= width, f"{path} is {page_width} px wide at {width} px"
        # The top bar's last control (Log out) is on the screen, not cut off at its right edge.
        right = admin.page.evaluate("document.querySelector('.topbar .who button').getBoundingClientRect().right")
        assert right <= width, f"{path}: Log out ends at {right} px on a {width} px screen"
        admin.screenshot(f"{path.strip('/').replace('/', '-') or 'overview'}-{width}px")


def test_login_page_screenshot(browser, live_server):
    seed_demo_fleet()
    s = Session(browser, live_server.url)
    s.page.goto(live_server.url + "/accounts/login/")
    s.screenshot("login")
    s.context.close()
    assert not s.errors, s.errors


def test_the_showback_pickers_wait_for_enter_too(session):
    """The showback page's window and grouping pickers still submitted on every change: the first
    arrow key reloaded the page (found by the QA of the other pickers)."""
    finn = session("finn")
    finn.open("/showback/")
    for name in ("window", "group_by"):
        picker = finn.page.locator(f"select[name={name}]")
        picker.focus()
        before = picker.input_value()
        finn.page.evaluate(WATCH_NAVIGATION)
        finn.page.keyboard.press("ArrowDown")
        finn.page.wait_for_function("() => window.__changes === 1", timeout=ANSWER_TIMEOUT_MS)
        assert finn.page.evaluate(NAVIGATIONS_A_TURN_LATER) == [], f"the first arrow on {name} navigated away"
        assert finn.page.url == finn.base + "/showback/"
        chosen = picker.input_value()
        assert chosen != before
        with finn.page.expect_navigation():
            finn.page.keyboard.press("Enter")
        assert f"{name}={chosen}" in finn.page.url
        finn.open("/showback/")
