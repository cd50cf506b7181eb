"""`GET /api/v1/metrics/etas/`: how far the ETAs told held, over the jobs that started in the last
`days` after waiting with one (services/eta_record.py); a bad `days` is a 400 naming it."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import Job
from controlplane.services import eta_record
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

MIN = 60.0


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(f.make_user("alice"))  # any signed-in user: the figures are the fleet's
    return client


def started(*, ago_min: float, told_min_before: float, wait_told_min: float | None) -> Job:
    """A job that started `ago_min` minutes ago, `told_min_before` minutes before the ETA it was
    first told (negative: after it), that ETA told `wait_told_min` minutes before it."""
    start = timezone.now() - timedelta(minutes=ago_min)
    job = f.make_job(f.make_team(f"t{ago_min:g}"), state="running")
    told = start + timedelta(minutes=told_min_before) if wait_told_min is not None else None
    told_at = told - timedelta(minutes=wait_told_min) if told is not None and wait_told_min is not None else None
    Job.objects.filter(pk=job.pk).update(started_at=start, eta_told=told, eta_told_at=told_at)
    return job


def test_the_record_counts_the_jobs_started_on_time_and_how_much_of_the_wait_told_they_had(api):
    started(ago_min=100, told_min_before=60, wait_told_min=120)    # waited 60 of 120: early by 60
    started(ago_min=90, told_min_before=10, wait_told_min=30)      # waited 20 of 30: early by 10
    started(ago_min=80, told_min_before=-30, wait_told_min=60)     # waited 90 of 60: late by 30
    started(ago_min=70, told_min_before=0, wait_told_min=None)     # waited with no ETA: not judged
    started(ago_min=8 * 24 * 60, told_min_before=5, wait_told_min=10)  # before the week

    body = api.get("/api/v1/metrics/etas/").json()

    assert body["judged"] == 3
    assert body["on_time"] == pytest.approx(2 / 3)
    assert body["median_share_of_wait"] == pytest.approx(20 / 30)  # of 0.5, 0.67, 1.5
    assert body["median_early_s"] == pytest.approx(60 * MIN)  # of 10 and 60 min: the seed's index rule
    assert body["late_p95_s"] == pytest.approx(30 * MIN) and body["late_max_s"] == pytest.approx(30 * MIN)
    assert api.get("/api/v1/metrics/etas/?days=9").json()["judged"] == 4


def test_no_job_judged_gives_nulls_not_zeros(api):
    body = api.get("/api/v1/metrics/etas/?days=1").json()
    assert body["judged"] == 0
    assert body["on_time"] is None and body["median_share_of_wait"] is None and body["late_max_s"] is None
    assert body["size_classes"] == []


@pytest.mark.parametrize("days", ["0", "91", "a week", "-3"])
def test_a_bad_days_is_a_400_naming_it(api, days):
    response = api.get("/api/v1/metrics/etas/", {"days": days})
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["days"], response.json()


def test_a_misspelt_parameter_is_a_400_naming_what_it_takes(api):
    response = api.get("/api/v1/metrics/etas/", {"dayz": "3"})
    assert response.status_code == 400
    assert response.json()["errors"] == {"dayz": ["Unknown query parameter; this endpoint takes: days, format."]}


def test_the_record_needs_a_signed_in_user():
    assert APIClient().get("/api/v1/metrics/etas/").status_code in (401, 403)



def test_metrics_count_the_jobs_judged_in_the_last_day_and_those_on_time():
    started(ago_min=100, told_min_before=60, wait_told_min=120)  # on time
    started(ago_min=80, told_min_before=-30, wait_told_min=60)   # 30 min late
    started(ago_min=70, told_min_before=0, wait_told_min=None)   # no ETA: not judged
    started(ago_min=2 * 24 * 60, told_min_before=5, wait_told_min=10)  # before the day
    admin = Client()
    admin.force_login(f.make_user("root", superuser=True))
    text = admin.get("/metrics").content.decode()
    assert "\nquartermaster_eta_judged_jobs 2.0\n" in text and "\nquartermaster_eta_on_time_jobs 1.0\n" in text


def test_a_likely_start_takes_the_median_share_of_the_wait_told_and_only_below_one():
    now = timezone.now()
    record = eta_record.EtaRecord(since=now, until=now, judged=3, on_time=1.0, median_share_of_wait=0.25,
                                  median_early_s=60.0, late_p95_s=0.0, late_max_s=0.0)
    told_now = eta_record.FirstEta(eta=now + timedelta(hours=4), told_at=now)
    assert eta_record.likely_start(record, told_now) == now + timedelta(hours=1)
    late = dataclasses.replace(record, median_share_of_wait=1.2)
    assert eta_record.likely_start(late, told_now) is None
    # counted from when the first ETA was told, not from now: told 2 h ago to wait 4 h, 1 h ago
    told_before = eta_record.FirstEta(eta=now + timedelta(hours=2), told_at=now - timedelta(hours=2))
    assert eta_record.likely_start(record, told_before) == now - timedelta(hours=1)


def test_the_record_is_also_judged_per_size_class_split_at_the_largest_node(api):
    gpu_type = f.make_gpu_type("H100")
    f.make_node(gpu_type, gpu_count=4)
    f.make_node(gpu_type, gpu_count=8)  # the largest: a job of 8+ GPUs needs a whole node wherever it runs
    f.make_node(gpu_type, gpu_count=16, state="retired")  # out of the fleet
    for ago, gpus in ((100, 1), (90, 7), (80, 8)):
        job = started(ago_min=ago, told_min_before=10, wait_told_min=40)  # each waited 30 of 40
        Job.objects.filter(pk=job.pk).update(gpus=gpus)
    late = started(ago_min=70, told_min_before=-20, wait_told_min=20)  # waited 40 of 20
    Job.objects.filter(pk=late.pk).update(gpus=32)

    body = api.get("/api/v1/metrics/etas/").json()

    assert body["judged"] == 4
    small, large = body["size_classes"]
    assert (small["size_class"], small["node_gpus"], small["judged"], small["on_time"]) == ("small", 8, 2, 1.0)
    assert small["median_share_of_wait"] == pytest.approx(0.75) and small["late_max_s"] == 0
    assert (large["size_class"], large["node_gpus"], large["judged"], large["on_time"]) == ("large", 8, 2, 0.5)
    assert large["median_share_of_wait"] == pytest.approx(2.0)  # of 0.75 and 2: the seed's index rule
    assert large["late_max_s"] == pytest.approx(20 * MIN)
