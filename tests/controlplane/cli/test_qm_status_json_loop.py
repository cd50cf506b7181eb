"""`qm status JOB --json` carries the scheduling loop's state (`loop`) as `qm list --json` and
`qm explain --json` do (researcher review, 7 Dec): in text `qm status` said when the loop had
stalled, but its JSON was `jobs/{id}/`'s answer, which had no `loop`, so a script reading a
waiting job's queue position and ETA could not tell they were a dead loop's. Now `jobs/{id}/`
answers `loop` as jobs/, explain, jobs/priority/ and metrics/queue/ do (its queue position, ETA
and reason are the last cycle's word too), so `qm status` reads it in its one request, and a
waiting job's text report no longer asks `jobs/{id}/explain/` for it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.core.signals import request_started
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import SchedulerLease
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


@contextmanager
def _requests_seen() -> Iterator[list[str]]:
    """The paths the live server (a thread of this process) is asked for meanwhile."""
    paths: list[str] = []

    def seen(sender: Any, environ: dict[str, Any], **kwargs: Any) -> None:
        paths.append(environ["PATH_INFO"])

    request_started.connect(seen)
    try:
        yield paths
    finally:
        request_started.disconnect(seen)


def _stalled_ten_minutes_ago() -> None:
    SchedulerLease.objects.update_or_create(
        name="scheduler", defaults={"last_cycle_at": (timezone.now() - timedelta(minutes=10)).replace(microsecond=0)})


def test_qm_status_json_carries_the_loop_in_its_one_request(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, fleet.research, name="big", gpus=8, pending_code="QuotaExceeded",
                     pending_message="Team ml's quota is used.", queue_position=1,
                     eta=timezone.now() + timedelta(hours=2))
    _stalled_ten_minutes_ago()
    listed = alice_qm("list", "--json").json()
    explained = alice_qm("explain", str(job.pk), "--json").json()

    with _requests_seen() as paths:
        body = alice_qm("status", str(job.pk), "--json").json()

    assert body["id"] == job.pk and body["queue_position"] == 1
    assert body["loop"]["stalled"] is True and body["loop"]["last_cycle_age_s"] >= 600
    # the same object, under the same key, as the other JSON outputs of qm
    assert set(body["loop"]) == set(listed["loop"]) == set(explained["loop"])
    assert paths == [f"/api/v1/jobs/{job.pk}/"]

    with _requests_seen() as paths:
        text = alice_qm("status", str(job.pk))
    assert "The scheduling loop has stalled" in text.out.splitlines()[-1], text.out
    assert paths == [f"/api/v1/jobs/{job.pk}/"]  # a waiting job's report asked explain/ for the loop


def test_qm_status_json_of_an_ended_job_carries_the_loop_too(alice_qm, fleet) -> None:
    done = f.make_job(fleet.ml, name="done", state=JobState.SUCCEEDED, finished_at=timezone.now(), exit_code=0)
    _stalled_ten_minutes_ago()

    body = alice_qm("status", str(done.pk), "--json").json()

    assert body["state"] == "succeeded" and body["loop"]["stalled"] is True
