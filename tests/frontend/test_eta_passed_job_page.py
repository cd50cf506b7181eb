"""A waiting job's ETA that has passed reads as passed, not "now".

Before, with the scheduling loop stopped, the job page said "ETA 2026-11-30 02:10:00 UTC
(now)" for an ETA three minutes in the past, and the jobs list "ETA now", as if the job were
about to start; nothing starts while the loop is down. Now the page (and its live update)
says when the estimate was, that it passed and that no cycle has run since, with the loop's
last cycle when it has stalled; the list says "ETA passed 3 min ago"."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.utils import timezone

from controlplane.models import PendingPlace, SchedulerLease
from frontend.templatetags.qm import utc


def eta_text(html: str) -> str:
    match = re.search(r'<dd id="eta">(.*?)</dd>', html, re.S)
    assert match, html
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", match.group(1))).strip()


def waiting_job(submit_as: Any, eta_in_s: float, last_cycle_s_ago: float) -> tuple[Any, Any, Any]:
    job = submit_as("alice", name="waits", gpus=8, gpus_per_node=8)
    now = timezone.now()
    eta = now + timedelta(seconds=eta_in_s)
    PendingPlace.objects.update_or_create(job=job, defaults={"queue_position": 1, "eta": eta})
    last = now - timedelta(seconds=last_cycle_s_ago)
    SchedulerLease.objects.update_or_create(name="scheduler", defaults={"epoch": 1, "last_cycle_at": last})
    return job, eta, last


def test_a_passed_eta_while_the_loop_is_down_says_it_passed(submit_as: Any, client_for: Any) -> None:
    job, eta, last = waiting_job(submit_as, eta_in_s=-190, last_cycle_s_ago=400)
    client = client_for("alice")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]
    for html in (page, live):
        text = eta_text(html)
        assert "now" not in text.split(";")[0], text
        assert text.startswith(f"was {utc(eta)}, passed 3 min ago: no scheduling cycle has run since"), text
        assert f"the scheduling loop has not run since {utc(last)} (7 min ago)" in text, text
    listing = client.get("/jobs/").content.decode()
    assert "ETA passed 3 min ago" in listing
    assert "ETA now" not in listing


def test_a_passed_eta_between_two_cycles_says_the_next_one_estimates_again(submit_as: Any, client_for: Any) -> None:
    job, eta, _ = waiting_job(submit_as, eta_in_s=-2, last_cycle_s_ago=4)
    text = eta_text(client_for("alice").get(f"/jobs/{job.pk}/").content.decode())
    # (the page is rendered on the real clock a moment after the job was written: on a slow
    # host that moment can cross a second)
    assert text in {f"was {utc(eta)}, passed {s} s ago: no scheduling cycle has run since; the next one estimates "
                    "it again" for s in (2, 3)}, text


def test_a_future_eta_reads_as_before(submit_as: Any, client_for: Any) -> None:
    job, eta, _ = waiting_job(submit_as, eta_in_s=600, last_cycle_s_ago=1)
    text = eta_text(client_for("alice").get(f"/jobs/{job.pk}/").content.decode())
    assert text == f"{utc(eta)} (in 10 min)"
