"""The jobs list's live update says which of the rows shown no longer match the list's filters
(`left`): a list of pending jobs whose job started, a list by name whose job was renamed. qm.js
marks those rows in place (tests/frontend/test_jobs_list_rows_that_left_browser.py). Before, such
a row stayed in a list of pending jobs as if it matched, its state cell saying Running, until a
reload."""

from __future__ import annotations

import re
from urllib.parse import parse_qs

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job

pytestmark = pytest.mark.django_db


def _poll(client, page: str) -> dict:
    """One live update of `page` as it was read: its live URL with the rows it shows."""
    html = client.get(page).content.decode()
    url = re.search(r'data-live-url="([^"]*)"', html).group(1).replace("&amp;", "&")
    extra = parse_qs(re.search(r'data-live-extra="([^"]*)"', html).group(1).replace("&amp;", "&"))
    return lambda: client.get(url + ("&" if "?" in url else "?") +
                              "&".join(f"{k}={v[0]}" for k, v in extra.items())).json()


def test_a_pending_job_that_started_leaves_a_list_of_pending_jobs(client_for, submit_as) -> None:
    starts = submit_as("alice", name="starts", gpus=1)
    waits = submit_as("alice", name="waits", gpus=1)
    client = client_for("alice")
    pending = _poll(client, "/jobs/?state=pending")
    everything = _poll(client, "/jobs/")
    assert pending()["left"] == [] and pending()["said"] == ""

    Job.objects.filter(pk=starts.pk).update(state=JobState.RUNNING, started_at=timezone.now())
    body = pending()

    assert body["left"] == [starts.pk]
    assert body["said"] == (f"No longer matching this list's filters: job {starts.pk} (left in place until a "
                            "reload).")
    assert "Running" in body["html"][f"job-state-{starts.pk}"]  # its state cell still follows it
    assert body["html"]["jobs-count"].strip() == "1 job"
    assert everything()["left"] == []  # every state: it still matches
    assert waits.pk not in body["left"]

    Job.objects.filter(pk=starts.pk).update(state=JobState.PENDING, started_at=None)  # requeued: back in
    assert pending()["left"] == []


def test_rows_renamed_out_of_a_list_by_name_are_said_together(client_for, submit_as) -> None:
    first = submit_as("alice", name="sweep-1", gpus=1)
    second = submit_as("alice", name="sweep-2", gpus=1)
    poll = _poll(client_for("alice"), "/jobs/?name=sweep")
    Job.objects.filter(pk__in=[first.pk, second.pk]).update(name="renamed")
    body = poll()
    assert sorted(body["left"]) == sorted([first.pk, second.pk])
    assert re.search(r"filters: jobs \d+ and \d+ \(left in place", body["said"]), body["said"]
