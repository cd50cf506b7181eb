"""The job page's Runs panel without a browser: a job with more runs than the panel lists shows
its latest ones with their own numbers and what each cost (the API's figures), links to the older
ones (`?runs_before=N`, which the live refresh keeps; a bad one is a 400 naming it); the live
refresh carries the same table; another team's member gets no panel (the page is a 404)."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from controlplane.models import AllocationGpu, Node
from controlplane.services import requeue
from frontend.views import jobs as job_views
from tests.controlplane.job_runs_story import bind_at, preempted_then_succeeded

pytestmark = pytest.mark.django_db


def _three_runs(submit_as):
    job = submit_as("alice", name="thrice", gpus=2)
    busy = AllocationGpu.objects.filter(live=True).values("node_id")
    first, second = Node.objects.filter(state="ready").exclude(pk__in=busy).order_by("name")[:2]
    story = preempted_then_succeeded(job, first, second, now=timezone.now())
    requeue.requeue(job.submitter, job.pk, reason="again")
    third = bind_at(job, [(second, [0, 1], "")], at=timezone.now() - timedelta(minutes=3))
    return job, story, third


#: How far a running run's cost may move between two requests of one test (rounding included).
CENTS_BETWEEN_REQUESTS = Decimal("0.05")
HALF_CENT = Decimal("0.005")


def _usd(value) -> str:
    return f"${value:,.2f}"


def test_the_panel_lists_the_latest_runs_numbered_as_the_whole_list(client_for, submit_as, monkeypatch):
    job, story, third = _three_runs(submit_as)
    monkeypatch.setattr(job_views, "MAX_RUNS_SHOWN", 2)
    client = client_for("alice")

    page = client.get(f"/jobs/{job.pk}/")
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-runs"]

    runs = page.context["runs"]
    assert [(r.run, r.generation) for r in runs] == [(2, story.succeeded.generation), (3, third.generation)]
    assert page.context["run_count"] == 3
    api = client.get(f"/api/v1/jobs/{job.pk}/runs/").json()
    for html in (page.content.decode(), live):
        assert 'id="run-2"' in html and 'id="run-3"' in html and 'id="run-1"' not in html
        assert (f'Latest 2 of 3 runs · <a href="?runs_before=2#runs" id="older-runs">older runs</a>; all are in the '
                f"API at <code>/api/v1/jobs/{job.pk}/runs/</code>") in html
        assert "Then requeued after it ended by alice: again" in html
        # Each run's cost is the API's, and the note says what all three cost, as the API's total.
        # The running run is priced to each request's now, and the API is asked last: it may be
        # a cent or so on (2 GPUs cost about a cent every 4 s), never less than the page's rounding.
        ended, running = api["results"][1:]
        assert f'<td class="run-cost">{_usd(ended["cost_usd"])}</td>' in html
        shown = re.search(r'<tr id="run-3"[^>]*>.*?<td class="run-cost">\$([\d,.]+)</td>', html, re.S)
        assert shown and -HALF_CENT <= Decimal(str(running["cost_usd"])) - Decimal(shown[1]) <= CENTS_BETWEEN_REQUESTS
        total = re.search(r"All 3 runs held [\d,.]+ GPU-hours and cost \$([\d,.]+), at the prices showback charges \(to now\)\.", html)
        assert total and -HALF_CENT <= Decimal(str(api["total_cost_usd"])) - Decimal(total[1]) <= CENTS_BETWEEN_REQUESTS
    assert [r.outcome for r in runs] == ["succeeded", "running"]
    assert api["total_cost_usd"] > 0 and sum(x["cost_usd"] for x in api["results"]) == pytest.approx(
        api["total_cost_usd"], abs=1e-9)


def test_older_runs_are_a_link_away_and_the_live_refresh_keeps_them(client_for, submit_as, monkeypatch):
    job, story, _ = _three_runs(submit_as)
    monkeypatch.setattr(job_views, "MAX_RUNS_SHOWN", 2)
    client = client_for("alice")

    page = client.get(f"/jobs/{job.pk}/", {"runs_before": 2})
    live = client.get(f"/ui/jobs/{job.pk}.json", {"runs_before": 2}).json()["html"]["job-runs"]

    assert page.status_code == 200
    assert [(r.run, r.generation) for r in page.context["runs"]] == [(1, story.preempted.generation)]
    # The live refresh asks for the same runs, not the latest.
    assert page.context["live_url"] == f"/ui/jobs/{job.pk}.json?runs_before=2"
    for html in (page.content.decode(), live):
        assert 'id="run-1"' in html and 'id="run-2"' not in html
        assert 'Runs 1–1 of 3 runs · <a href="?#runs" id="newer-runs">newer runs</a>;' in html
        assert 'id="older-runs"' not in html
        # Its output link keeps the page's runs.
        assert f'href="?generation={story.preempted.generation}&amp;runs_before=2"' in html
    # The page before the latest, from the middle: runs 1-2, newer is the latest.
    middle = client.get(f"/jobs/{job.pk}/", {"runs_before": 3})
    assert [r.run for r in middle.context["runs"]] == [1, 2]
    # Past the last run by one is the latest page.
    assert [r.run for r in client.get(f"/jobs/{job.pk}/", {"runs_before": 4}).context["runs"]] == [2, 3]


@pytest.mark.parametrize(("value", "words"), [
    ("abc", "'abc' is not a run number of at least 2 (the runs before it are listed)."),
    ("1", "'1' is not a run number of at least 2 (the runs before it are listed)."),
    ("-2", "'-2' is not a run number of at least 2 (the runs before it are listed)."),
    ("²", "'²' is not a run number of at least 2 (the runs before it are listed)."),
    ("9", "has 3 runs: there is no run 9."),
    ("9" * 5000, f"has 3 runs: there is no run {'9' * 40}."),
    ("0" * 30, f"'{'0' * 30}' is not a run number of at least 2"),
])
def test_a_bad_runs_before_is_a_400_naming_it(client_for, submit_as, value, words):
    job, _, _ = _three_runs(submit_as)
    client = client_for("alice")

    page = client.get(f"/jobs/{job.pk}/", {"runs_before": value})
    live = client.get(f"/ui/jobs/{job.pk}.json", {"runs_before": value})

    assert page.status_code == 400
    html = page.content.decode()
    assert 'id="job-runs-error"' in html and words.replace("'", "&#x27;") in html and "runs_before" in html
    assert 'data-live-html="job-runs"' not in html  # the refresh leaves the error alone
    assert page.context["live_url"] == f"/ui/jobs/{job.pk}.json"
    assert live.status_code == 400 and words in live.json()["errors"]["runs_before"][0]


def test_a_job_that_never_ran_has_no_run_to_page_to(client_for, submit_as):
    job = submit_as("alice", name="waits", gpus=2, hold=True)
    page = client_for("alice").get(f"/jobs/{job.pk}/", {"runs_before": 2})
    assert page.status_code == 400
    assert f"Job {job.pk} has no runs: there is no run 2." in page.content.decode()


def test_another_teams_member_cannot_read_the_runs(client_for, submit_as):
    job, _, _ = _three_runs(submit_as)
    assert client_for("bob").get(f"/jobs/{job.pk}/").status_code == 404
    assert client_for("bob").get(f"/ui/jobs/{job.pk}.json").status_code == 404
