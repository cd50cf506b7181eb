"""The job page's Output panel: the last lines of rank 0 of the latest run, escaped (a job's
output is shown, never read as HTML), with a link to all of it kept as plain text; the live
refresh (`/ui/jobs/<id>.json`) renders it the same way."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import AllocationState
from controlplane.models import Allocation, AllocationGpu, Job
from controlplane.services import job_logs
from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

HOSTILE = '<script>window.__qm_pwned = 1</script><img src=x onerror="window.__qm_pwned = 2">\n'


def running(job: Job) -> tuple[int, Any]:
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    return allocation.generation, AllocationGpu.objects.filter(allocation=allocation).first().node


def ship(job: Job, offset: int, text: str) -> int:
    generation, node = running(job)
    job_logs.store(node.pk, node.name, [job_logs.Chunk(generation, 0, offset, len(text.encode()), text)],
                   now=timezone.now())
    return offset + len(text.encode())


@pytest.mark.django_db
def test_job_output_is_shown_escaped_never_as_html(client_for, submit_as) -> None:
    job = submit_as("alice", name="train", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    ship(job, 0, "epoch 1 loss 2.5\n" + HOSTILE)
    client = client_for("alice")

    page = client.get(f"/jobs/{job.pk}/").content.decode()
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-output"]

    for html in (page, live):
        assert "&lt;script&gt;window.__qm_pwned = 1&lt;/script&gt;&lt;img src=x onerror=" in html
        assert "<script>window.__qm_pwned" not in html and "<img src=x" not in html
        assert "epoch 1 loss 2.5" in html
    generation, node = running(job)
    assert f"Rank 0 on {node.name}, run 1 · lease generation {generation}:" in page  # its first run, whatever the generation
    raw = client.get(f"/api/v1/jobs/{job.pk}/logs/", {"format": "txt", "generation": generation, "rank": 0})
    assert raw["Content-Type"] == "text/plain; charset=utf-8" and raw["X-Content-Type-Options"] == "nosniff"
    assert raw.content.decode() == "epoch 1 loss 2.5\n" + HOSTILE
    assert f'href="/api/v1/jobs/{job.pk}/logs/?format=txt&amp;generation={generation}&amp;rank=0' in page


@pytest.mark.django_db
def test_the_panel_shows_the_last_200_lines(client_for, submit_as) -> None:
    job = submit_as("alice", name="train", gpus=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    ship(job, 0, "".join(f"step {i}\n" for i in range(1, 501)))

    page = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert "step 301\n" in page and "step 500\n" in page and "step 300\n" not in page


@pytest.mark.django_db
def test_a_job_that_has_not_run_says_so(client_for, submit_as) -> None:
    job = submit_as("alice", name="queued", gpus=8, gpu_types=("H100-80GB",), hold=True)

    page = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()

    assert f"Job {job.pk} has not run yet: no output." in page


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_in_chromium_hostile_output_is_text_and_new_output_appears_live(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="train", gpus=8, gpu_types=("H100-80GB",))).job
    run_cycle("test")
    at = ship(job, 0, HOSTILE)
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page

    expect(page.locator("pre.job-output")).to_have_text(HOSTILE)
    assert page.evaluate("window.__qm_pwned") is None
    ship(job, at, "".join(f"step {i} loss 1.9\n" for i in range(1, 301)))
    expect(page.locator("pre.job-output")).to_contain_text("step 300 loss 1.9", timeout=LIVE_TIMEOUT_MS)
    assert page.evaluate("window.__qm_pwned") is None
    # The box scrolls, and opens at the newest line (after the live refresh too).
    assert page.evaluate("""() => {
        const box = document.querySelector('.job-output-scroll'), pre = box.querySelector('pre');
        const text = pre.firstChild, range = document.createRange();
        range.setStart(text, text.length - 3); range.setEnd(text, text.length - 2);
        const line = range.getBoundingClientRect(), frame = box.getBoundingClientRect();
        return box.scrollHeight > box.clientHeight && line.top >= frame.top && line.bottom <= frame.bottom + 1;
    }""")
