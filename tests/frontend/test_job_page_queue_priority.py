"""The job page of a waiting job in line says what places it in the queue, as `qm sprio` and
`GET jobs/priority/?job=` do (services/job_priority.py, the engine's `queue_factors`): its
effective priority with its parts (its class's value, the points waiting added), its team's
dominant share and its place "N of M in line". The page refreshes every 5 s: the fleet's
queue order is read once and shared by every view for a few seconds (the shared store), not
read again on each refresh."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import Job
from controlplane.services import holds, job_priority
from controlplane.shared_store import shared_store
from frontend.views import jobs as job_views

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_queue_order() -> None:
    shared_store().delete_prefix(job_views.QUEUE_ORDER_KEY)


def _row(html: str) -> str | None:
    found = re.search(r'<dd id="queue-priority">(.*?)</dd>', html, re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip() if found else None


def _pages(client, job) -> list[str | None]:
    return [_row(client.get(f"/jobs/{job.pk}/").content.decode()),
            _row(client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"])]


def test_a_waiting_job_in_line_shows_its_priority_its_teams_share_and_its_place(client_for, submit_as) -> None:
    submit_as("bob", name="first", gpus=8)
    job = submit_as("alice", name="second", gpus=8, priority_class="batch")
    Job.objects.filter(pk=job.pk).update(submitted_at=timezone.now() - timedelta(hours=5))  # aged a little
    api = APIClient()
    api.force_authenticate(get_user_model().objects.get(username="alice"))
    r = api.get("/api/v1/jobs/priority/", {"job": str(job.pk)}).json()
    (row,) = r["jobs"]
    assert r["in_line"] == 2 and row["order"] == 2  # research 500 goes before batch 200
    assert row["aging_points"] > 0 and row["effective_priority"] == row["class_value"] + row["aging_points"]

    aged = f" + {row['aging_points']:g} for waiting" if row["aging_points"] else ""
    said = (f"{row['effective_priority']:g} (class batch {row['class_value']:g}{aged}); team vision's dominant "
            f"share {row['team_share']:.3f}; runtime limit 2 h; 2 of 2 in line for the next cycle. "
            "Among equal priorities the lower team share goes first, then the shorter runtime limit, then the "
            "earlier submission.")
    assert _pages(client_for("alice"), job) == [said, said]
    assert _pages(client_for("admin"), job) == [said, said]


def test_no_row_for_a_held_running_or_unseen_job(client_for, submit_as) -> None:
    job = submit_as("alice", name="held", gpus=8)
    holds.hold(get_user_model().objects.get(username="alice"), job.pk)
    assert _pages(client_for("alice"), job) == [None, None]  # not in line
    assert client_for("bob").get(f"/jobs/{job.pk}/").status_code == 404  # another team's: not bob's to see


def test_the_refreshes_share_one_read_of_the_queue_order(client_for, submit_as, monkeypatch) -> None:
    job = submit_as("alice", name="waits", gpus=8)
    reads = []
    read = job_priority.queue_order
    monkeypatch.setattr(job_priority, "queue_order", lambda *a, **k: reads.append(1) or read(*a, **k))
    alice, admin = client_for("alice"), client_for("admin")
    for client in (alice, alice, admin):
        assert client.get(f"/ui/jobs/{job.pk}.json").json()["html"]["job-status"].count('id="queue-priority"') == 1
    assert len(reads) == 1


def test_a_job_passed_by_a_later_one_of_equal_priority_is_told_why(client_for, submit_as) -> None:
    """Under priority_fair_share a shorter runtime limit goes first among equal priorities and
    shares (the engine's third key; `qm sprio` shows it as LIMIT): a job submitted later with a
    shorter limit passes an older one. The page gave both the same priority and share and no
    word of the limit, so the older job's owner saw a newer, equal job ahead without a reason."""
    older = submit_as("alice", name="long", gpus=8, runtime_limit_s=4 * 3600)
    Job.objects.filter(pk=older.pk).update(submitted_at=timezone.now() - timedelta(minutes=10))
    newer = submit_as("alice", name="short", gpus=8, runtime_limit_s=600)
    alice = client_for("alice")
    long_row, short_row = _pages(alice, older)[0], _pages(alice, newer)[0]
    assert short_row.endswith("1 of 2 in line for the next cycle") or "1 of 2 in line" in short_row
    assert "2 of 2 in line" in long_row
    # each row says its own limit, and the rule that orders equals
    assert "runtime limit 4 h" in long_row and "runtime limit 10 min" in short_row
    assert "the shorter runtime limit" in long_row and "the earlier submission" in long_row
