"""The job page's Output panel shows the rank and run chosen (`?rank=R&generation=G`, or the
panel's two selects), lists the ranks that wrote output, and its raw-text link and live refresh
follow the choice; a bad choice is said on the page (400, naming the parameter), never a 500."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.choices import AllocationState
from controlplane.models import Allocation, AllocationGpu, Job
from controlplane.services import job_logs, reconcile, transitions
from controlplane.services.cycle import run_cycle
from controlplane.services.jobs import SubmitRequest, submit
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)


def live_run(job: Job) -> tuple[int, Any]:
    allocation = Allocation.objects.get(job=job, state=AllocationState.ACTIVE)
    return allocation.generation, AllocationGpu.objects.filter(allocation=allocation).first().node


def ship(job: Job, generation: int, node: Any, rank: int, offset: int, text: str) -> int:
    job_logs.store(node.pk, node.name, [job_logs.Chunk(generation, rank, offset, len(text.encode()), text)],
                   now=timezone.now())
    return offset + len(text.encode())


def two_runs(job: Job) -> tuple[int, int, Any]:
    """Run the job, let ranks 0 and 3 print, fence the run and run it again: (first, second, node)."""
    run_cycle("test")
    first, node = live_run(job)
    ship(job, first, node, 0, 0, "first run, rank zero\n")
    ship(job, first, node, 3, 0, "first run, rank three: CUDA error: an illegal memory access\n")
    with transaction.atomic():
        assert transitions.fence_allocation(Allocation.objects.get(job=job, generation=first).pk,
                                            lease=reconcile.lock_scheduler_lease(), at=timezone.now(),
                                            actor="test", reason="test")
    run_cycle("test")
    second, node2 = live_run(job)
    assert second != first
    ship(job, second, node2, 0, 0, "second run, rank zero\n")
    return first, second, node2


@pytest.mark.django_db
def test_the_panel_shows_the_chosen_rank_of_the_chosen_run_and_the_raw_link_follows(client_for, submit_as) -> None:
    job = submit_as("alice", name="train", gpus=8, gpu_types=("H100-80GB",))
    first, second, _ = two_runs(job)
    client = client_for("alice")

    latest = client.get(f"/jobs/{job.pk}/").content.decode()
    chosen = client.get(f"/jobs/{job.pk}/", {"rank": 3, "generation": first})
    live = client.get(f"/ui/jobs/{job.pk}.json", {"rank": 3, "generation": first})

    assert "second run, rank zero" in latest and "first run" not in latest
    # the run's number in the job, and its lease generation (a fleet-wide fencing token, not a run
    # count: until 7 Dec the page said "generation 25" of a job's first run)
    assert f'<option value="" selected>latest: run 2 · lease generation {second}</option>' in latest
    assert chosen.status_code == 200
    page = chosen.content.decode()
    assert "rank three: CUDA error" in page and "rank zero" not in page.split('<pre class="job-output">')[1]
    assert "Rank 3 on " in page and f", run 1 of 2 · lease generation {first}:" in page
    assert f'<option value="{first}" selected>run 1 · lease generation {first}</option>' in page
    assert '<option value="3" selected>rank 3</option>' in page and '<option value="0">rank 0</option>' in page
    assert "2 ranks wrote output in this run: 0, 3." in page
    assert (f'href="/api/v1/jobs/{job.pk}/logs/?format=txt&amp;generation={first}&amp;rank=3&amp;tail_bytes='
            in page)
    assert f"qm logs {job.pk} --generation {first} --rank 3 -f" in page
    # The live refresh asks for the same choice, and renders it the same way.
    assert f'data-live-url="/ui/jobs/{job.pk}.json?generation={first}&amp;rank=3"' in page
    assert live.status_code == 200 and "rank three: CUDA error" in live.json()["html"]["job-output"]
    raw = client.get(f"/api/v1/jobs/{job.pk}/logs/", {"format": "txt", "generation": first, "rank": 3})
    assert raw.content.decode() == "first run, rank three: CUDA error: an illegal memory access\n"


@pytest.mark.django_db
def test_a_rank_without_output_is_offered_and_says_which_ranks_wrote(client_for, submit_as) -> None:
    job = submit_as("alice", name="train", gpus=8, gpu_types=("H100-80GB",))
    first, second, _ = two_runs(job)

    page = client_for("alice").get(f"/jobs/{job.pk}/", {"rank": 5}).content.decode()

    assert f"Rank 5 of run 2 (lease generation {second}) has written nothing yet; ranks with output: 0." in page
    assert '<option value="5" selected>rank 5 (no output)</option>' in page


@pytest.mark.django_db
def test_a_gangs_panel_says_how_many_of_its_ranks_wrote_output(client_for, submit_as) -> None:
    """A 32-GPU gang of four nodes whose rank 0 alone printed (as the demo's simulated jobs, and
    most training scripts, do) said "1 rank wrote output in this run: 0.": read in the review of
    6 Dec as 31 ranks' output lost. It says of how many."""
    job = submit_as("alice", name="pretrain-gang", gpus=32, gpus_per_node=8, gpu_types=("H100-80GB",))
    run_cycle("test")
    generation, node = live_run(job)
    assert AllocationGpu.objects.filter(allocation__job=job).values("node").distinct().count() == 4
    ship(job, generation, node, 0, 0, "step 100 loss 2.31\n")

    page = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
    assert "1 of 32 ranks wrote output in this run: 0." in page

    other = AllocationGpu.objects.filter(allocation__job=job).exclude(node=node).first().node
    ship(job, generation, other, 8, 0, "rank 8: NCCL WARN timeout\n")
    page = client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
    assert "2 of 32 ranks wrote output in this run: 0, 8." in page


@pytest.mark.parametrize(("params", "words"), [
    ({"rank": "three"}, "rank: &#x27;three&#x27; is not a whole number: give 0 or more."),
    ({"rank": "-1"}, "rank: -1 is out of range: give from 0 to 1000000."),
    ({"rank": "99999999999999999999999"}, "rank: 99999999999999999999999 is out of range"),
    ({"generation": "0"}, "generation: 0 is out of range: give 1 or more."),
    ({"generation": "<b>x</b>"}, "generation: &#x27;&lt;b&gt;x&lt;/b&gt;&#x27; is not a whole number"),
    ({"generation": "424242"}, "generation: Job {job} has no run of generation 424242; its generations: {runs}."),
], ids=["word-rank", "negative-rank", "huge-rank", "zero-generation", "markup-generation", "no-such-run"])
@pytest.mark.django_db
def test_a_bad_choice_is_said_on_the_page_and_is_a_400_on_its_json(client_for, submit_as, params: dict[str, str],
                                                                   words: str) -> None:
    job = submit_as("alice", name="train", gpus=8, gpu_types=("H100-80GB",))
    first, second, _ = two_runs(job)
    client = client_for("alice")
    words = words.format(job=job.pk, runs=f"{first}, {second}")
    name = next(iter(params))

    page = client.get(f"/jobs/{job.pk}/", params)
    live = client.get(f"/ui/jobs/{job.pk}.json", params)
    api = client.get(f"/api/v1/jobs/{job.pk}/logs/", params)
    raw = client.get(f"/api/v1/jobs/{job.pk}/logs/", {**params, "format": "txt"})

    html = page.content.decode()
    assert page.status_code == 400 and f'role="alert">Cannot show that output: {words}' in html
    assert "<b>x</b>" not in html
    # The rest of the page is there, its choices too, and its live refresh leaves the panel alone.
    assert "<h2>Events</h2>" in html and f'<option value="{second}">run 2 · lease generation {second}</option>' in html
    assert f'data-live-url="/ui/jobs/{job.pk}.json"' in html and 'data-live-html="job-output"' not in html
    assert live.status_code == 400 and name in live.json()["errors"]
    assert api.status_code == 400 and name in api.json()["errors"]
    assert raw.status_code == 400 and raw.content.decode().startswith(f"{name}: ")


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_in_chromium_the_selects_choose_the_rank_and_run_and_the_choice_stays_live(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="train", gpus=8, gpu_types=("H100-80GB",))).job
    first, second, node = two_runs(job)
    at = ship(job, second, node, 2, 0, "second run, rank two: step 1\n")
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    panel = page.locator("[data-live-html=job-output]")
    expect(panel.locator("pre.job-output")).to_have_text("second run, rank zero\n")
    expect(panel.locator(".output-choice .note")).to_have_text("2 of 8 ranks wrote output in this run: 0, 2.")

    panel.locator("select[name=rank]").select_option("2")
    page.wait_for_url(f"**/jobs/{job.pk}/?rank=2")
    alice.open(page.url.replace(alice.base, ""))
    expect(panel.locator("pre.job-output")).to_have_text("second run, rank two: step 1\n")
    # The live refresh keeps to rank 2: its new lines appear, rank 0's never.
    ship(job, second, node, 0, 22, "second run, rank zero again\n")
    ship(job, second, node, 2, at, "second run, rank two: step 2\n")
    expect(panel.locator("pre.job-output")).to_have_text(
        "second run, rank two: step 1\nsecond run, rank two: step 2\n", timeout=LIVE_TIMEOUT_MS)

    panel.locator("select[name=generation]").select_option(str(first))
    page.wait_for_url(f"**/jobs/{job.pk}/?generation={first}&rank=2")
    alice.open(page.url.replace(alice.base, ""))
    # run 1 is over (run 2 runs now): it wrote nothing, and will not ("has written nothing yet" until 7 Dec)
    expect(panel.locator(".muted")).to_contain_text(f"Rank 2 of run 1 (lease generation {first}) wrote nothing; "
                                                    "ranks with output: 0, 3.")
    panel.locator("select[name=rank]").select_option("3")
    page.wait_for_url(f"**/jobs/{job.pk}/?generation={first}&rank=3")
    alice.open(page.url.replace(alice.base, ""))
    expect(panel.locator("pre.job-output")).to_have_text(
        "first run, rank three: CUDA error: an illegal memory access\n")
    alice.screenshot("job_output_rank_selector")
    href = panel.get_by_role("link", name="All of it kept, as plain text").get_attribute("href")
    assert f"generation={first}&rank=3" in href
    raw = page.request.get(alice.base + href)
    assert raw.text() == "first run, rank three: CUDA error: an illegal memory access\n"

    response = alice.open(f"/jobs/{job.pk}/?rank=x")
    assert response.status == 400
    alice.expect_refusal(f"/jobs/{job.pk}/", 400)
    expect(page.get_by_role("alert")).to_have_text(
        "Cannot show that output: rank: 'x' is not a whole number: give 0 or more.")
