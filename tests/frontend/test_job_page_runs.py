"""The job page's Runs panel without a browser: a job with more runs than the panel lists shows
its latest ones with their own numbers and says where the rest are; the live refresh carries the
same table; another team's member gets no panel (the page is a 404)."""

from __future__ import annotations

from datetime import timedelta

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


def test_the_panel_lists_the_latest_runs_numbered_as_the_whole_list(client_for, submit_as, monkeypatch):
    job, story, third = _three_runs(submit_as)
    monkeypatch.setattr(job_views, "MAX_RUNS_SHOWN", 2)
    client = client_for("alice")

    page = client.get(f"/jobs/{job.pk}/")
    live = client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-runs"]

    runs = page.context["runs"]
    assert [(r.run, r.generation) for r in runs] == [(2, story.succeeded.generation), (3, third.generation)]
    assert page.context["run_count"] == 3
    for html in (page.content.decode(), live):
        assert 'id="run-2"' in html and 'id="run-3"' in html and 'id="run-1"' not in html
        assert f"Latest 2 of 3 runs; all are in the API at <code>/api/v1/jobs/{job.pk}/runs/</code>" in html
        assert "Then requeued after it ended by alice: again" in html
    assert [r.outcome for r in runs] == ["succeeded", "running"]


def test_another_teams_member_cannot_read_the_runs(client_for, submit_as):
    job, _, _ = _three_runs(submit_as)
    assert client_for("bob").get(f"/jobs/{job.pk}/").status_code == 404
    assert client_for("bob").get(f"/ui/jobs/{job.pk}.json").status_code == 404
