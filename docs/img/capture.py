"""Screenshots of every page for docs/dashboards.md, taken from a running demo.

    .venv/bin/python manage.py demo --port 8793 &      # let it run a few minutes first
    .venv/bin/python docs/img/capture.py --base http://127.0.0.1:8793

Drives Debian's headless Chromium with Playwright, as the browser tests do, and writes
docs/img/<page>.png.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from playwright.sync_api import sync_playwright

OUT = Path(__file__).resolve().parent
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="http://127.0.0.1:8000")
    parser.add_argument("--skip", action="append", default=[], help="a screenshot not to retake (e.g. showback)")
    args = parser.parse_args()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)

        def session(username: str):  # type: ignore[no-untyped-def]
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(args.base + "/accounts/login/")
            page.fill("input[name=username]", username)
            page.fill("input[name=password]", username)
            page.click("button[type=submit]")
            page.wait_for_url(args.base + "/")
            return page

        def shot(page, path: str, name: str, ready: str = "body[data-charts-ready=true]") -> None:  # type: ignore[no-untyped-def]
            if name in args.skip:
                return
            page.goto(args.base + path)
            page.wait_for_selector(ready, timeout=600_000)
            page.wait_for_timeout(500)
            page.screenshot(path=str(OUT / f"{name}.png"), full_page=True)
            print("wrote", name)

        login = browser.new_context(viewport={"width": 1400, "height": 700}).new_page()
        login.goto(args.base + "/accounts/login/")
        login.screenshot(path=str(OUT / "login.png"))
        admin = session("admin")
        shot(admin, "/?window=1h", "overview")
        shot(admin, "/?window=1h&team=language", "overview-team")
        # The oldest running job on the first page of running jobs: the longest story.
        admin.goto(args.base + "/jobs/?state=running")
        running = admin.locator("table.jobs tbody tr").last.get_attribute("data-job")
        shot(admin, "/jobs/", "jobs")
        shot(admin, f"/jobs/{running}/", "job-running")
        waiting = admin.locator("table.jobs [data-state=pending]")
        if waiting.count():
            job = waiting.first.locator("xpath=ancestor::tr").get_attribute("data-job")
            shot(admin, f"/jobs/{job}/", "job-waiting")
        shot(admin, "/teams/?window=30d", "teams")
        shot(admin, "/nodes/", "nodes")
        # The node the oldest running job runs on: the page's jobs and events are never empty.
        admin.goto(args.base + f"/jobs/{running}/")
        node = admin.locator("#job-status a[href^='/nodes/'], [data-live-html=job-status] a[href^='/nodes/']").first
        shot(admin, node.get_attribute("href"), "node")
        if "what-if" not in args.skip:  # the form prefilled by its query; Replay (a POST) starts the replay
            admin.goto(args.base + "/what-if/?days=1&placement=pack&quota%3Avision%3AH100-80GB=16"
                       "&quota%3Alanguage%3AH100-80GB=56")
            with admin.expect_navigation(url=re.compile(r"/what-if/\?.*key=")):
                admin.click("#what-if-form button[type=submit]")
            admin.wait_for_selector("[data-replay=done]", timeout=600_000)
            admin.wait_for_timeout(500)
            admin.screenshot(path=str(OUT / "what-if.png"), full_page=True)
            print("wrote", "what-if")
        finn = session("finn")
        shot(finn, "/showback/?window=1h", "showback")
        alice = session("alice")
        alice.set_viewport_size({"width": 390, "height": 844})
        shot(alice, "/", "overview-phone")
        alice.set_viewport_size({"width": 1400, "height": 1000})
        alice.goto(args.base + "/jobs/")
        alice.fill("[data-field=name]", "too-wide")
        alice.fill("[data-field=gpus]", "16")
        alice.fill("[data-field=gpus_per_node]", "16")
        alice.wait_for_function("document.querySelector('[data-verdict]').textContent.includes('never run')")
        alice.locator("#submit-panel").screenshot(path=str(OUT / "submit-validation.png"))
        print("wrote submit-validation")
        assert re.match(r"^\d+$", running or "")
        browser.close()


if __name__ == "__main__":
    main()
