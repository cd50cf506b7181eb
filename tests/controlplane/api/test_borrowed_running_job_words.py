"""A running job admitted on borrowed capacity is said to be so in the same words by
`GET jobs/{id}/explain/` (`qm status`, `qm explain`) and the job page, and never "partly": the
engine records only whether the team went over its nominal quota to admit it, and a lender's
reclaim treats the whole gang as borrowed. Found by the researcher review (6 Dec): a 1-GPU job
read "Running … on 1 GPU of a100-02, partly on capacity borrowed from the cohort", where `qm
runs` said "borrowed"."""

from __future__ import annotations

import html
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
WORDS = "over its team's nominal quota, on borrowed capacity: a lender reclaiming it preempts borrowed work first"


def _running(fleet: Any, *, borrowed: bool) -> Job:
    now = timezone.now()
    job = f.make_job(fleet.ml, gpus=1, state=JobState.RUNNING, started_at=now, borrowed=borrowed)
    allocation = Allocation.objects.create(job=job, generation=Allocation.objects.count() + 1, epoch=1,
                                           created_at=now, started_at=now, borrowed=borrowed)
    AllocationGpu.objects.create(allocation=allocation, node=fleet.nodes[1], gpu_index=0)
    return job


def test_a_borrowed_one_gpu_job_is_said_borrowed_not_partly(fleet: Any, admin: Any) -> None:
    job = _running(fleet, borrowed=True)

    reason = admin.get(f"/api/v1/jobs/{job.pk}/explain/").json()["reason"]
    assert reason.endswith(f"on 1 GPU of {fleet.nodes[1].name}, {WORDS}."), reason
    assert "partly" not in reason


def test_the_job_page_says_the_same_words(fleet: Any) -> None:
    job = _running(fleet, borrowed=True)
    browser = Client()
    browser.force_login(f.make_user("borrowed-page-admin", superuser=True))
    response = browser.get(f"/jobs/{job.pk}/")
    assert response.status_code == 200
    page = html.unescape(response.content.decode())
    assert WORDS in page and "partly" not in page


def test_a_job_on_its_own_quota_says_nothing_of_borrowing(fleet: Any, admin: Any) -> None:
    job = _running(fleet, borrowed=False)
    reason = admin.get(f"/api/v1/jobs/{job.pk}/explain/").json()["reason"]
    assert "borrowed" not in reason, reason
