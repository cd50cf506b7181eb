"""A page's live updates on Playwright's faked clock: its timers and `Date` are the clock's, which
stands still until the test moves it, so a poll happens at an instant the test names, never
"within about a second", and minutes of the page's time pass in milliseconds of the test's.

The clock is installed before the page is opened (its scripts' timers and dates are the clock's
from the start), then paused on a round instant, where the page's round of polls is started again
so that every poll falls on a multiple of the page's pace from there. The test steps the clock one
`step` at a time and, whenever a poll went out in a step, waits for it to be answered (or to fail)
before the next: time stands still while the real server answers, as a poll's wait only begins
once the last one is over (qm.js `pollAfter`). Each request to the live endpoint is seen by route
interception, at the faked instant it went out; `unreachable` makes the route fail them as an
unreachable server does (net::ERR_INTERNET_DISCONNECTED), else they go to the live server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from playwright.sync_api import Page, Route, expect

#: Counts the polls the page starts and those over (answered, refused or failed), on the body, so
#: the test can wait for a poll to be over: Playwright's wait_for_function polls on animation
#: frames, which a paused clock never draws. What a poll does is qm.js's own (`QM.poll`).
COUNT_POLLS = """() => {
  const poll = QM.poll;
  const body = document.body;
  body.dataset.pollsStarted = "0";
  body.dataset.pollsOver = "0";
  body.dataset.pollsAt = "";
  QM.poll = () => {
    body.dataset.pollsStarted = String(Number(body.dataset.pollsStarted) + 1);
    body.dataset.pollsAt += (body.dataset.pollsAt ? " " : "") + Date.now();
    return poll().finally(() => { body.dataset.pollsOver = String(Number(body.dataset.pollsOver) + 1); });
  };
  QM.stop();
  QM.start();
}"""


def install(page: Page, at: datetime) -> None:
    """Before the page is opened: its clock begins at `at` and runs on as the real one, for now."""
    page.clock.install(time=at)


class LivePolls:
    """The polls of the page's live endpoint (a glob Playwright's route takes), on the paused clock."""

    def __init__(self, page: Page, endpoint: str, paused_at: datetime) -> None:
        self.page = page
        self.now = paused_at
        self.asked: list[datetime] = []  # each request's faked instant, as the route saw it
        self.failed: list[datetime] = []  # those refused as by an unreachable server
        self.unreachable = False
        page.evaluate("() => QM.stop()")  # no poll of the running clock's round goes on past the pause
        page.clock.pause_at(paused_at)
        page.route(endpoint, self._route)
        page.evaluate(COUNT_POLLS)

    @property
    def pace_ms(self) -> int:
        return int(self.page.evaluate("() => Number(document.body.dataset.liveEvery)"))

    def _route(self, route: Route) -> None:
        # The page waits on this request until it is routed, and the test on the page's poll being
        # over before it moves the clock: `now` is the faked instant the request went out.
        self.asked.append(self.now)
        if self.unreachable:
            self.failed.append(self.now)
            route.abort("internetdisconnected")
        else:
            route.continue_()

    def run_for(self, ms: int, step_ms: int) -> None:
        """Move the clock on `ms`, `step_ms` at a time, each poll over before the next step."""
        assert ms % step_ms == 0, (ms, step_ms)
        body = self.page.locator("body")
        for _ in range(ms // step_ms):
            # Polls fall on the steps' ends, and their requests may be routed before run_for returns.
            self.now += timedelta(milliseconds=step_ms)
            self.page.clock.run_for(step_ms)
            started = self.page.evaluate("() => document.body.dataset.pollsStarted")
            expect(body).to_have_attribute("data-polls-over", started)

    def since(self, start: datetime) -> list[float]:
        """The instants of the requests from `start` on, in seconds after it; the page's own
        clock said the same instants when it asked (a poll off a step's end would not)."""
        in_page = self.page.evaluate("() => document.body.dataset.pollsAt")
        said = [datetime.fromtimestamp(int(ms) / 1000, UTC) for ms in in_page.split()]
        assert said == self.asked, (said, self.asked)
        return [(at - start).total_seconds() for at in self.asked if at >= start]


def utc(*args: Any) -> datetime:
    return datetime(*args, tzinfo=UTC)
