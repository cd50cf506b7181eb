"""A job that can never run as asked (here: more H100s than its team's quota and borrowing
limit allow) showed, under "Why it waits", "ETA: no estimate yet: the jobs ahead declare no end
the scheduler can count on": blaming jobs ahead that all have runtime limits, and promising an
estimate that can never come. `qm explain` says "latest start: none: it can never run as asked" (the page's
words now too) and "can it ever run: no, not as asked: change the request". The page now says there is no start to estimate, and
points to the change, on the page and in its live update."""

from __future__ import annotations

import re

import pytest

from controlplane.services.cycle import run_cycle

pytestmark = pytest.mark.django_db


def _eta(html: str) -> str:
    found = re.search(r'<dd id="eta">(.*?)</dd>', html, flags=re.S)
    assert found is not None, html
    return found.group(1)


def test_a_job_that_can_never_run_has_no_eta_to_wait_for(client_for, submit_as) -> None:
    job = submit_as("bob", name="huge", gpus=96, gpu_types=("H100-80GB",))  # language: 32 nominal + 48 borrowable
    run_cycle("test")
    job.refresh_from_db()
    assert job.pending_code == "CanNeverRun" and not job.pending_resolvable

    client = client_for("bob")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"]

    for html in (page, live):
        eta = _eta(html)
        assert "jobs ahead" not in eta and "yet" not in eta
        assert "never" in eta
        assert "on this fleet" not in html  # a quota, not the hardware, stops it
        assert "change the request" in html


def test_a_job_that_will_run_keeps_its_estimate(client_for, submit_as) -> None:
    for name in ("a", "b"):
        submit_as("bob", name=name, gpus=64, gpu_types=("H100-80GB",), runtime_limit_s=3600)
    run_cycle("test")
    waiting = submit_as("bob", name="c", gpus=64, gpu_types=("H100-80GB",), runtime_limit_s=3600)
    run_cycle("test")
    waiting.refresh_from_db()
    assert waiting.pending_resolvable and waiting.eta is not None

    eta = _eta(client_for("bob").get(f"/jobs/{waiting.pk}/").content.decode())
    assert "UTC" in eta and "never" not in eta
