"""A running elastic job below its maximum that the cycle does not grow says why, on the job
(`growth_code`, `growth_note`), in the API, `qm status` and the job page; once it grows the note
goes. On PostgreSQL through the real cycle: two 8-GPU nodes, a team whose quota holds 8."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

import scheduler_core as engine
from controlplane.choices import JobState
from controlplane.models import Job, Quota, Team
from controlplane.services import cycle
from controlplane.services.cycle import _store_growth_notes
from scheduler_core import GrowthCode, GrowthNote
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def team() -> Team:
    h100 = f.make_gpu_type("H100-80GB", 80)
    for i in range(2):
        f.make_node(h100, name=f"n{i}", pool="h100")
    team = f.make_team("ml", default_priority_class=f.make_priority_class("batch", 100, min_runtime_s=0))
    f.make_quota(team, h100, 8)
    return team


def test_an_elastic_job_held_back_by_its_quota_says_so_and_the_note_goes_once_it_grows(team: Team) -> None:
    at = timezone.now() - timedelta(minutes=1)
    job = Job.objects.create(team=team, name="e", priority_class=team.default_priority_class, gpus=8,
                             min_gpus=8, max_gpus=16, runtime_limit_s=8 * 3600, submitted_at=at,
                             state_changed_at=at)
    assert cycle.run_cycle("w").binds == 1
    assert cycle.run_cycle("w").resizes == 0
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert job.growth_code == "GrowthQuota"
    assert job.growth_note == "Holds 8 of at most 16 GPUs: team ml's quota has no room for 8 more H100-80GB GPUs."

    api = APIClient()
    api.force_authenticate(f.make_user("boss", superuser=True))
    body = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert (body["growth_code"], body["growth_note"]) == (job.growth_code, job.growth_note)

    Quota.objects.filter(team=team).update(nominal_gpus=16)
    assert cycle.run_cycle("w").resizes == 1
    job.refresh_from_db()
    assert (job.growth_code, job.growth_note) == ("", "")


def test_a_growth_note_is_written_only_when_it_changes(team: Team, django_assert_num_queries) -> None:
    at = timezone.now() - timedelta(minutes=1)
    job = Job.objects.create(team=team, name="e", priority_class=team.default_priority_class, gpus=8,
                             min_gpus=8, max_gpus=16, runtime_limit_s=8 * 3600, submitted_at=at,
                             state_changed_at=at)
    cycle.run_cycle("w")
    cycle.run_cycle("w")
    job.refresh_from_db()
    assert job.growth_code == "GrowthQuota"
    plan = engine.Plan((), (), (), (), (), (), engine.FleetFigures(16, 8, 8, 0, {}, {}, {}),
                       growth_notes=(GrowthNote(str(job.pk), GrowthCode.QUOTA, job.growth_note),))
    with django_assert_num_queries(2):  # clear the others, read this one: unchanged, not written
        _store_growth_notes(plan)
    with django_assert_num_queries(3):  # and a changed note is written
        _store_growth_notes(engine.Plan((), (), (), (), (), (), plan.fleet, growth_notes=(
            GrowthNote(str(job.pk), GrowthCode.NO_ROOM, "Holds 8 of at most 16 GPUs: no room."),)))
    job.refresh_from_db()
    assert (job.growth_code, job.growth_note) == ("NoRoom", "Holds 8 of at most 16 GPUs: no room.")
