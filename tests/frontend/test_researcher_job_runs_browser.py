"""In Chromium: a researcher whose job was preempted and then run again to success opens its page
and reads its Runs table: one row per run, oldest first, with when each was bound, started and
ended, how it ended (preempted and requeued, then succeeded), where, the GPU-hours it held, what
it cost at its nodes' price, its borrowed quota and the work the preemption lost, and what all
its runs cost. Requeued and bound again, the page's live refresh adds the third run without a
reload. With more runs than the panel lists, she follows "older runs" and back. A job that never
ran says so."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from controlplane.models import Node, PriceRate
from controlplane.services import requeue
from controlplane.services.jobs import SubmitRequest, submit
from frontend.templatetags.qm import duration, usd, utc
from frontend.views import jobs as job_views
from tests.controlplane.job_runs_story import NOTICE, bind_at, idle_nodes, preempted_then_succeeded
from tests.frontend.test_browser_pages import LIVE_TIMEOUT_MS, browser, session, user  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _time(at: Any) -> str:
    """A time as the table says it: the pages' UTC second, its header saying UTC."""
    return utc(at).removesuffix(" UTC")


def _rate(node: Node) -> Decimal:
    """The demo's $/GPU-hour for the node's GPU type and capacity tier (one rate each, from January)."""
    return PriceRate.objects.get(gpu_type_id=node.gpu_type_id, capacity_tier=node.capacity_tier).usd_per_gpu_hour


def _cells(page: Any, run: int) -> list[str]:
    """The run's row, its head (the run's number, a `th scope="row"`) and its cells, in order."""
    return [c.strip() for c in page.locator(f"table.runs tr#run-{run} :is(th, td)").all_inner_texts()]


def test_researcher_reads_the_runs_of_her_preempted_job_and_sees_a_new_one_live(session: Any) -> None:  # noqa: F811
    now = timezone.now()
    job = submit(user("alice"), SubmitRequest(name="twice-run", gpus=2)).job
    first, second = idle_nodes(2)
    story = preempted_then_succeeded(job, first, second, now=now)
    t0 = story.t0

    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page

    expect(page.locator("table.runs tbody tr")).to_have_count(2)
    # "Generation" may hyphenate in a narrow window (a soft hyphen: it reads whole where it fits)
    assert [th.replace("\u00ad", "") for th in page.locator("table.runs thead th").all_inner_texts()] == [
        "Run", "Generation", "Started (UTC)", "Agents up (UTC)", "Ended (UTC)", "Elapsed", "How it ended", "GPUs",
        "Where", "GPU-hours", "Cost", "Quota", "Work lost"]
    # 2 GPUs × 5,430 s on the first node, 2 GPUs × 2 h on the second, each at its price; cents
    # rounded cumulatively (the second's: the total's cents less the first's), so the runs add up.
    exact = [2 * 5430 * _rate(first) / 3600, 2 * 7200 * _rate(second) / 3600]
    cent = Decimal("0.01")
    cost_one = exact[0].quantize(cent)
    cost_two = (exact[0] + exact[1]).quantize(cent) - cost_one
    one = _cells(page, 1)
    assert one[:6] == ["1", str(story.preempted.generation), _time(t0), _time(t0 + timedelta(minutes=1)),
                       _time(t0 + timedelta(minutes=90, seconds=30)), duration(5430)]
    assert one[6].startswith("Preempted; requeued Preempted") and NOTICE in one[6]
    assert one[7:] == ["2", f"{first.name} ×2", "3.02", usd(cost_one), "borrowed", "1.02 GPU-h"]  # as its events say it
    two = _cells(page, 2)
    assert two[:6] == ["2", str(story.succeeded.generation), _time(t0 + timedelta(hours=2)),
                       _time(t0 + timedelta(hours=2, minutes=1)), _time(t0 + timedelta(hours=4)), duration(2 * 3600)]
    assert two[6] == "Succeeded (exit code 0) Exited"
    assert two[7:] == ["2", f"{second.name} ×2", "4.00", usd(cost_two), "own", "–"]
    expect(page.locator("#job-runs-cost")).to_have_text(
        f"All 2 runs held 7.02 GPU-hours and cost {usd(cost_one + cost_two)}, at the prices showback charges.")
    # The generation links to that run's output.
    expect(page.locator("table.runs tr#run-2 a")).to_have_attribute("href", f"?generation={story.succeeded.generation}")
    alice.screenshot("job-runs")

    # Requeued after it ended and bound again: the live refresh adds run 3, running.
    requeue.requeue(user("alice"), job.pk, reason="one more epoch")
    third = bind_at(job, [(first, [0, 1], "")], at=timezone.now() - timedelta(minutes=5))
    page.evaluate("QM.poll()")
    expect(page.locator("table.runs tbody tr")).to_have_count(3, timeout=LIVE_TIMEOUT_MS)
    three = _cells(page, 3)
    assert three[:2] == ["3", str(third.generation)] and three[4] == "still running"
    assert three[6] == "Running" and three[8] == f"{first.name} ×2"
    expect(page.locator("table.runs tr#run-2 td.run-end")).to_contain_text(
        "Then requeued after it ended by alice: one more epoch")


def test_researcher_pages_to_older_runs_and_back(session: Any, monkeypatch: Any) -> None:  # noqa: F811
    """Three runs, the panel listing two: "older runs" shows run 1 (the live refresh keeps it), and
    "newer runs" leads back to the latest."""
    monkeypatch.setattr(job_views, "MAX_RUNS_SHOWN", 2)
    job = submit(user("alice"), SubmitRequest(name="thrice-run", gpus=2)).job
    first, second = idle_nodes(2)
    story = preempted_then_succeeded(job, first, second, now=timezone.now())
    requeue.requeue(user("alice"), job.pk, reason="again")
    bind_at(job, [(second, [0, 1], "")], at=timezone.now() - timedelta(minutes=3))

    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    page = alice.page
    rows = page.locator("table.runs tbody tr")
    expect(rows).to_have_count(2)
    assert [_cells(page, n)[0] for n in (2, 3)] == ["2", "3"]
    expect(page.locator("#job-runs-pages")).to_contain_text("Latest 2 of 3 runs · older runs")

    page.locator("#older-runs").click()
    expect(page).to_have_url(f"{alice.base}/jobs/{job.pk}/?runs_before=2#runs")
    expect(rows).to_have_count(1)
    assert _cells(page, 1)[:2] == ["1", str(story.preempted.generation)]
    expect(page.locator("#job-runs-pages")).to_contain_text("Runs 1–1 of 3 runs · newer runs")
    page.evaluate("QM.poll()")  # the refresh asks for the same runs; evaluate waits until it is applied
    expect(rows).to_have_count(1)
    expect(page.locator("table.runs tr#run-1")).to_have_count(1)

    page.locator("#newer-runs").click()
    expect(rows).to_have_count(2)
    expect(page.locator("table.runs tr#run-3")).to_have_count(1)


def test_a_job_that_never_ran_says_so(session: Any) -> None:  # noqa: F811
    job = submit(user("alice"), SubmitRequest(name="waits", gpus=2, hold=True)).job
    alice = session("alice")
    alice.open(f"/jobs/{job.pk}/")
    expect(alice.page.locator("#runs #job-runs-empty")).to_have_text(
        "This job has not run yet: each time it is bound to GPUs (again after a preemption or a requeue) a run "
        "appears here.")
    expect(alice.page.locator("table.runs")).to_have_count(0)
