"""A running job that becomes borrowed (its team's quota lowered, or its team moved out of its
cohort, while it runs) is first in line when a lender reclaims its GPUs: its owner's hooks
subscribed to `borrowed` are told so, with the cycle's `job.borrowing` sentence; others are not.

Found by QA (7 Dec): the cycle wrote the event, but no notification offered it.
A real HTTP receiver (tests/controlplane/webhook_receiver.py) takes the POSTs; the mark is set
by a real cycle after a real quota change through the API."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.models import NotificationDelivery, NotificationHook, Quota
from controlplane.services import cycle, notifications
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.fleet_fixture import Fleet, client_for
from tests.controlplane.webhook_receiver import LOOPBACK, Receiver, running

pytestmark = pytest.mark.django_db

#: Every event a hook could subscribe to before `borrowed` existed: such a stored list gets no more.
OLD_EVENTS = ["started", "succeeded", "failed", "timed_out", "cancelled", "preempted", "requeued", "unschedulable"]


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> None:
    settings.QM = {**settings.QM, "PUBLIC_URL": "https://qm.example.org", "WEBHOOK_TIMEOUT_S": 0.5,
                   "WEBHOOK_ALLOWED_NETWORKS": [LOOPBACK]}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from running()


def _hook(user: Any, url: str, events: list[str]) -> NotificationHook:
    return NotificationHook.objects.create(user=user, url=url, events=events, secret="s3cret-of-the-hook",
                                           created_at=timezone.now())


def _borrowed_under_a_lowered_quota(fleet: Fleet) -> Any:
    """alice's two 8-GPU jobs fill ml's nominal 16; an admin lowers it to 8: the newer one now
    counts as borrowed. Returns that job."""
    now = timezone.now()
    jobs = []
    for minutes, node in ((30, fleet.nodes[1]), (10, fleet.nodes[2])):
        job = running_job(fleet.ml, gpus=8, started_at=now - timedelta(minutes=minutes), priority_class=fleet.research,
                          runtime_limit_s=4 * 3600, submitter=fleet.users["owner"], name=f"train-{minutes}")
        hold(job, [(node, 8)], job.started_at)
        jobs.append(job)
    quota = Quota.objects.get(team=fleet.ml, gpu_type=fleet.h100)
    r = client_for(fleet, "admin").patch(f"/api/v1/quotas/{quota.pk}/", {"nominal_gpus": 8},
                                         content_type="application/json")
    assert r.status_code == 200, r.content
    cycle.run_cycle("worker-1")
    return jobs[1]


def test_a_hook_subscribed_to_borrowed_is_told_its_job_is_now_reclaimable_first(
        fleet: Fleet, receiver: Receiver) -> None:
    _hook(fleet.users["owner"], receiver.url, ["borrowed"])

    job = _borrowed_under_a_lowered_quota(fleet)
    notifications.deliver_due(now=timezone.now() + timedelta(seconds=1))

    [got] = [r.json() for r in receiver.received]
    assert got["event"] == "borrowed" and got["job_id"] == job.pk and got["team"] == "ml"
    assert got["message"] == ("Now counts as borrowed: team ml holds 16 H100-80GB GPUs, 8 above its nominal quota "
                              "of 8; a lender reclaiming its GPUs preempts borrowed work first")
    assert got["text"].startswith(f"Job {job.pk} train-10 (ml) now counts as borrowed: team ml holds "), got["text"]
    assert got["state"] == "running"


def test_a_hook_not_subscribed_to_borrowed_gets_nothing(fleet: Fleet, receiver: Receiver) -> None:
    """A hook stored with every event there was before `borrowed`, and another user's own-jobs
    hook subscribed to it: neither is sent the notice."""
    _hook(fleet.users["owner"], receiver.url, OLD_EVENTS)
    _hook(fleet.users["other_team"], receiver.url, ["borrowed"])

    _borrowed_under_a_lowered_quota(fleet)
    notifications.deliver_due(now=timezone.now() + timedelta(seconds=1))

    assert receiver.received == []
    assert not NotificationDelivery.objects.exists()


def test_a_team_hook_subscribed_to_borrowed_is_told_too(fleet: Fleet, receiver: Receiver) -> None:
    hooked = _hook(fleet.users["admin"], receiver.url, ["borrowed"])
    hooked.team = fleet.ml
    hooked.save(update_fields=["team"])

    job = _borrowed_under_a_lowered_quota(fleet)
    notifications.deliver_due(now=timezone.now() + timedelta(seconds=1))

    assert [(r.json()["event"], r.json()["job_id"]) for r in receiver.received] == [("borrowed", job.pk)]
