"""`GET /api/v1/jobs/priority/` (Slurm's sprio): the waiting jobs you may see in the order the next
cycle gives them, each with its class's value, the points waiting added, its team's dominant
share and its runtime limit; another team's jobs count in `in_line` but are not listed."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.models import GpuType, Job, Node, PriorityClass, Team
from controlplane.services.cycle import run_cycle
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(db: Any) -> dict[str, Any]:
    """One 8-GPU node; teams ml and cv; classes batch (10) and prod (1000); cv used the fleet
    for hours (a higher dominant share); four jobs waiting and one held."""
    h100 = GpuType.objects.create(name="H100-80GB", memory_gb=80)
    Node.objects.create(name="n0", pool="h100", gpu_type=h100, gpu_count=8, cpus=96, memory_gb=1024,
                        leaf_switch="leaf-0", spine="spine-0")
    batch = PriorityClass.objects.create(name="batch", value=10)
    prod = PriorityClass.objects.create(name="prod", value=1000)
    ml = Team.objects.create(name="ml", default_priority_class=batch)
    cv = Team.objects.create(name="cv", default_priority_class=batch, decayed_gpu_seconds=8 * 3600 * 4,
                             usage_as_of=timezone.now())
    now = timezone.now()

    def job(team: Team, name: str, pc: PriorityClass, waited: timedelta, **kw: Any) -> Job:
        return f.make_job(team, pc, name=name, gpus=8, submitted_at=now - waited, **kw)

    jobs = {
        "old": job(ml, "old", batch, timedelta(hours=2, minutes=5)),   # +2 aging points
        "urgent": job(ml, "urgent", prod, timedelta(minutes=1)),
        "ml-new": job(ml, "ml-new", batch, timedelta(minutes=2)),
        "cv-new": job(cv, "cv-new", batch, timedelta(minutes=3)),
        "held": job(ml, "held", prod, timedelta(minutes=1), hold="user"),
    }
    alice = APIClient()
    alice.force_authenticate(f.make_user("alice", team=ml))
    return {"jobs": jobs, "alice": alice}


def test_the_queue_in_order_with_the_factors_of_each_place(queue):
    body = queue["alice"].get("/api/v1/jobs/priority/").json()
    jobs = queue["jobs"]
    assert body["queue_order"] == "priority_fair_share" and body["in_line"] == 4
    rows = body["jobs"]
    # cv-new is another team's: counted, not listed; ml-new goes before it (lower share) at order 3
    assert [(r["name"], r["order"]) for r in rows] == [("urgent", 1), ("old", 2), ("ml-new", 3)]
    old = rows[1]
    assert (old["job"], old["class_value"], old["aging_points"], old["effective_priority"]) == (jobs["old"].pk, 10, 2, 12)
    assert rows[0]["priority_class"] == "prod" and rows[0]["effective_priority"] == 1000
    assert body["team_shares"]["cv"] > body["team_shares"]["ml"] == 0.0
    assert all(r["team_share"] == body["team_shares"]["ml"] for r in rows)


def test_only_the_jobs_asked_for(queue):
    jobs = queue["jobs"]
    body = queue["alice"].get("/api/v1/jobs/priority/", {"job": f"{jobs['ml-new'].pk},{jobs['held'].pk}"}).json()
    assert [(r["name"], r["order"]) for r in body["jobs"]] == [("ml-new", 3)]  # a held job is not in line


@pytest.mark.parametrize("value", ["12,x", "0", "-4", "12,,13"])
def test_a_bad_job_list_is_a_400_naming_job(queue, value):
    response = queue["alice"].get("/api/v1/jobs/priority/", {"job": value})
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["job"], response.json()


def test_an_unknown_parameter_is_refused(queue):
    response = queue["alice"].get("/api/v1/jobs/priority/", {"colour": "red"})
    assert response.status_code == 400 and list(response.json()["errors"]) == ["colour"]


def test_a_page_of_the_queue_with_its_count_and_links(queue):
    """It answered every job in line at once: 5,012 jobs, 1 MB of JSON on the scale audit's
    installation (bench/scale_audit.py). It is a page now, `limit` and `offset` as every list's."""
    alice = queue["alice"]

    first = alice.get("/api/v1/jobs/priority/", {"limit": 2}).json()
    second = alice.get(first["next"]).json()

    assert (first["count"], first["in_line"], first["previous"]) == (3, 4, None)
    assert [(r["name"], r["order"]) for r in first["jobs"]] == [("urgent", 1), ("old", 2)]
    assert "limit=2" in first["next"] and "offset=2" in first["next"]
    assert [(r["name"], r["order"]) for r in second["jobs"]] == [("ml-new", 3)]
    assert second["next"] is None and second["previous"] is not None and second["count"] == 3
    assert alice.get("/api/v1/jobs/priority/").json()["count"] == 3  # 50 a page unless asked


@pytest.mark.parametrize(("query", "field"), [({"limit": "abc"}, "limit"), ({"limit": "0"}, "limit"),
                                              ({"offset": "-1"}, "offset")])
def test_a_bad_page_is_a_400_naming_it(queue, query, field):
    response = queue["alice"].get("/api/v1/jobs/priority/", query)
    assert response.status_code == 400 and list(response.json()["errors"]) == [field], response.json()


def test_one_teams_jobs_and_a_team_not_yours_is_refused(queue):
    mine = queue["alice"].get("/api/v1/jobs/priority/", {"team": "ml"}).json()
    theirs = queue["alice"].get("/api/v1/jobs/priority/", {"team": "cv"})
    admin = APIClient()
    admin.force_authenticate(f.make_user("root", superuser=True))
    cv = admin.get("/api/v1/jobs/priority/", {"team": "cv"}).json()

    assert [r["name"] for r in mine["jobs"]] == ["urgent", "old", "ml-new"] and mine["in_line"] == 4
    assert theirs.status_code == 400
    assert theirs.json()["errors"] == {"team": ["no team named 'cv' whose jobs you may read"]}
    assert [(r["name"], r["order"]) for r in cv["jobs"]] == [("cv-new", 4)] and cv["count"] == 1


def test_a_task_of_an_array_is_said_with_its_array_and_index(queue):
    """The rows named a task by its array's name alone (`sweep`), where the job list says `sweep [3]`."""
    array_id = uuid.uuid4()
    task = Job.objects.filter(pk=queue["jobs"]["old"].pk)
    task.update(array_id=array_id, array_index=3)

    rows = {r["name"]: r for r in queue["alice"].get("/api/v1/jobs/priority/").json()["jobs"]}

    assert (rows["old"]["array_id"], rows["old"]["array_index"]) == (str(array_id), 3)
    assert (rows["urgent"]["array_id"], rows["urgent"]["array_index"]) == (None, None)


def test_a_job_that_can_never_run_carries_the_engines_reason_and_one_that_can_none(queue):
    """A row said only `can_run: false` of a job that can never run on this fleet: not why, so
    `qm sprio` could not say it. It carries the reason the last cycle stored (`reason_code`, the
    engine's PascalCase reason, and `reason`, its sentence with its numbers), null for a job that
    can run; nothing is decided here."""
    ml = Team.objects.get(name="ml")
    never = f.make_job(ml, PriorityClass.objects.get(name="batch"), name="wide", gpus=16, topology="same_node",
                       submitted_at=timezone.now() - timedelta(minutes=4))
    run_cycle("test")  # binds `urgent` on the one node; stores why each other job waits

    rows = {r["name"]: r for r in queue["alice"].get("/api/v1/jobs/priority/").json()["jobs"]}

    assert (rows["wide"]["job"], rows["wide"]["can_run"]) == (never.pk, False)
    assert rows["wide"]["reason_code"] == "CanNeverRun"
    assert rows["wide"]["reason"] == "Can never run on this fleet: it needs 16 GPUs on one node; the largest capable node has 8."
    assert [(r["can_run"], r["reason_code"], r["reason"]) for name, r in rows.items() if name != "wide"] == \
        [(True, None, None)] * 2
    # they wait for a reason too (WaitingForReservation, InsufficientGpus): one that moves each cycle, not said here
    assert all(Job.objects.get(pk=r["job"]).pending_code for name, r in rows.items() if name != "wide")


def test_the_reasons_cost_no_query_per_job(queue):
    """The reasons are read with the page's names, in the same query: a page of 40 jobs that can
    never run costs what a page of one does."""
    ml, batch = Team.objects.get(name="ml"), PriorityClass.objects.get(name="batch")
    f.make_job(ml, batch, name="wide", gpus=16, topology="same_node")
    run_cycle("test")
    alice = queue["alice"]
    alice.get("/api/v1/jobs/priority/")  # what a first request reads once (who alice is)
    with CaptureQueriesContext(connection) as one:
        assert alice.get("/api/v1/jobs/priority/").status_code == 200
    for k in range(40):
        f.make_job(ml, batch, name=f"wide-{k}", gpus=16, topology="same_node")
    run_cycle("test")

    with CaptureQueriesContext(connection) as many:
        body = alice.get("/api/v1/jobs/priority/").json()

    assert sum(r["reason_code"] == "CanNeverRun" for r in body["jobs"]) == 41
    assert len(many) == len(one), [q["sql"] for q in many.captured_queries]
