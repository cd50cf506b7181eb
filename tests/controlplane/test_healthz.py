from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import JobState, NodeState
from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import Job, Node, PriorityClass, Team

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
    assert response.json() == {"status": "ok", "jobs": {"pending": 2, "running": 1}, "nodes": {"ready": 15}}


def test_pages_other_than_healthz_and_login_need_a_login(client: Client) -> None:
    assert client.get("/").status_code == 302
    assert client.get("/accounts/login/").status_code == 200
