"""`GET jobs/{id}/explain/` gives a waiting job's likely start by the ETA record of its own size
class (`likely_start`: when, the median share of the wait told of the jobs of its class, the
counts it rests on, the class and the node size it splits at), the figure the job's page says and
`qm explain` prints; null when there is nothing to say, and when fewer than 20 jobs of its class
were judged: a gang is never told a start by the luck of 1-GPU jobs. Without one, a waiting job
with an ETA ahead is told why (`likely_start_missing`, in the page's words), beside the record
it rests on (`eta_record`: the fleet's and its class's), read as the page reads it: kept a minute."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from controlplane.models import Job, PriorityClass
from controlplane.services import eta_record
from controlplane.shared_store import shared_store
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def team():
    f.make_node(f.make_gpu_type("H100"), gpu_count=8)  # the fleet's nodes hold 8 GPUs: large is 8+
    return f.make_team("ml")


@pytest.fixture
def api(team) -> APIClient:
    client = APIClient()
    client.force_authenticate(f.make_user("alice", team=team))
    return client


def started(team, *, shares: list[float], gpus: int = 1, wait_told_min: float = 100) -> None:
    """Jobs of `gpus` GPUs that started a while ago, each after `share` of the wait told."""
    told_at = timezone.now() - timedelta(hours=3)
    pc = PriorityClass.objects.order_by("value").first() or f.make_priority_class()
    Job.objects.bulk_create(
        Job(team=team, priority_class=pc, name=f"ran-{gpus}-{i}", gpus=gpus, runtime_limit_s=3600, state="running", submitted_at=told_at,
            state_changed_at=told_at, started_at=told_at + timedelta(minutes=share * wait_told_min),
            eta_told=told_at + timedelta(minutes=wait_told_min), eta_told_at=told_at)
        for i, share in enumerate(shares))


def waiting(team, *, gpus: int, eta_in_min: float) -> Job:
    return f.make_job(team, gpus=gpus, pending_code="QuotaExceeded", queue_position=1,
                      eta=timezone.now() + timedelta(minutes=eta_in_min))


def explained(api, job: Job, field: str = "likely_start"):
    return api.get(f"/api/v1/jobs/{job.pk}/explain/").json()[field]


def a_minute_passes() -> None:
    """The record kept in the shared store (eta_record.FLEET_RECORD_TTL_S) expires."""
    shared_store().delete(eta_record.FLEET_RECORD_KEY)


def test_a_gangs_likely_start_is_not_pulled_by_a_record_full_of_small_jobs(api, team):
    started(team, shares=[0.05] * 40)  # 1-GPU jobs: they backfill and start almost at once
    started(team, shares=[0.5] * 10 + [0.8] * 15, gpus=32)  # gangs: most of the wait told
    gang = waiting(team, gpus=32, eta_in_min=22)
    single = waiting(team, gpus=1, eta_in_min=22)

    before = timezone.now()
    likely = explained(api, gang)
    after = timezone.now()

    assert likely["size_class"] == "large" and likely["node_gpus"] == 8
    assert likely["share_of_wait"] == pytest.approx(0.8) and likely["judged"] == 25
    assert likely["on_time"] == 1.0 and likely["days"] == 7
    at = parse_datetime(likely["at"])
    eta = Job.objects.get(pk=gang.pk).eta
    assert before + (eta - before) * 0.8 <= at <= after + (eta - after) * 0.8  # 17.6 min away, not 1

    small = explained(api, single)
    assert small["size_class"] == "small" and small["judged"] == 40
    assert small["share_of_wait"] == pytest.approx(0.05)


def test_no_likely_start_when_too_few_of_its_class_were_judged_and_it_says_why(api, team):
    started(team, shares=[0.1] * 40)
    started(team, shares=[0.6] * (eta_record.MIN_JUDGED_FOR_LIKELY - 1), gpus=8)
    gang = waiting(team, gpus=16, eta_in_min=60)
    body = api.get(f"/api/v1/jobs/{gang.pk}/explain/").json()
    assert body["likely_start"] is None  # not the small jobs' 0.1 either
    assert body["likely_start_missing"] == {
        "code": "too_few_of_its_size", "size_class": "large", "node_gpus": 8, "judged": 19, "needed": 20,
        "share_of_wait": None, "days": 7,
        "reason": "only 19 of them asked 8+ GPUs, as this one does, and it takes 20 to tell one (jobs of another "
                  "size wait differently)"}
    record = body["eta_record"]
    assert (record["days"], record["judged"], record["on_time"]) == (7, 59, 1.0)
    assert record["own_class"] == {"size_class": "large", "node_gpus": 8, "judged": 19, "on_time": 1.0,
                                   "median_share_of_wait": pytest.approx(0.6)}

    started(team, shares=[0.6], gpus=8)  # the twentieth of its class, within the minute the record is kept
    assert explained(api, gang, "likely_start_missing")["judged"] == 19  # as its page says it meanwhile
    a_minute_passes()
    assert explained(api, gang)["share_of_wait"] == pytest.approx(0.6)
    assert explained(api, gang, "likely_start_missing") is None


def test_no_likely_start_without_a_record_an_eta_or_a_share_below_one(api, team):
    job = waiting(team, gpus=1, eta_in_min=60)
    assert explained(api, job) is None  # nothing judged
    missing = explained(api, job, "likely_start_missing")
    assert (missing["code"], missing["size_class"], missing["judged"]) == ("no_record", None, 0)
    assert missing["reason"] == "no job waited with an ETA and started in the last 7 days"
    assert explained(api, job, "eta_record") == {"days": 7, "judged": 0, "on_time": None,
                                                 "median_share_of_wait": None, "own_class": None}

    started(team, shares=[1.5] * 20)  # all late: a share above one, the ETA is the better word
    a_minute_passes()
    assert explained(api, job) is None
    missing = explained(api, job, "likely_start_missing")
    assert (missing["code"], missing["size_class"], missing["judged"], missing["share_of_wait"]) == \
        ("not_sooner_than_told", "small", 20, pytest.approx(1.5))
    assert missing["reason"] == ("the median job of fewer than 8 GPUs started after 150% of the wait it was told, "
                                 "no sooner than told: its ETA is the better word")

    started(team, shares=[0.2] * 21)
    a_minute_passes()
    no_eta = f.make_job(team, pending_code="InsufficientGpus", queue_position=2)
    running = f.make_job(team, state="running")
    for other in (no_eta, running):  # nothing to be likelier than, nothing to say why
        body = api.get(f"/api/v1/jobs/{other.pk}/explain/").json()
        assert body["likely_start"] is body["likely_start_missing"] is body["eta_record"] is None
    assert explained(api, job)["share_of_wait"] == pytest.approx(0.2)
