from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import JobState, NodeState
from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import Job, Node, PriorityClass, SchedulerLease, Team

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_login_from_the_live_database(client: Client) -> None:
    seed_demo_fleet()
    Node.objects.filter(name="a100-04").update(state=NodeState.CORDONED)
    now = timezone.now()
    for state in (JobState.PENDING, JobState.PENDING, JobState.RUNNING, JobState.SUCCEEDED):
        Job.objects.create(
            team=Team.objects.get(name="vision"), name="j", priority_class=PriorityClass.objects.get(name="batch"),
            gpus=1, runtime_limit_s=60, submitted_at=now, state_changed_at=now, state=state,
        )
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body == {"status": "ok", "jobs": {"pending": 2, "running": 1}, "nodes": {"ready": 15},
                    "loop": {"last_cycle_at": None, "last_cycle_age_s": None, "stalled": None, "stalled_after_s": 30.0}}


def test_healthz_gives_the_age_of_the_loops_last_cycle(client: Client) -> None:
    SchedulerLease.objects.create(name="scheduler", epoch=3, holder="w1", expires_at=timezone.now(),
                                  last_cycle_at=timezone.now() - timedelta(seconds=90))

    loop = client.get("/healthz").json()["loop"]

    assert loop["last_cycle_at"].endswith("Z") and 89 <= loop["last_cycle_age_s"] <= 120


@pytest.mark.parametrize("database_url", ["postgres://qm:qm@127.0.0.1:1/qm", "sqlite:////nonexistent/dir/db.sqlite3"],
                         ids=["postgres_refused", "sqlite_unopenable"])
def test_healthz_with_the_database_down_is_a_json_503(database_url: str) -> None:
    """Found by QA: with PostgreSQL stopped /healthz answered Django's HTML 500 page, which a
    probe cannot parse. A real process against a database that cannot be reached."""
    script = (
        "import django, json; django.setup(); from django.test import Client; "
        "r = Client().get('/healthz'); print(r.status_code, r['Content-Type'], r.content.decode())"
    )
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "controlplane.settings"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])
    status, content_type, body = done.stdout.strip().splitlines()[-1].split(" ", 2)

    assert (status, content_type) == ("503", "application/json"), done.stderr[-2000:]
    assert json.loads(body)["status"] == "unavailable" and "unreachable" in json.loads(body)["database"]


def test_pages_other_than_healthz_and_login_need_a_login(client: Client) -> None:
    assert client.get("/").status_code == 302
    assert client.get("/accounts/login/").status_code == 200
