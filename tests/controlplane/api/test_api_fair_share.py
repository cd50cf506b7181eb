"""GET scheduler/fair-share/ (Slurm's sshare): every team's dominant share and its parts, lowest
first, the very shares the next cycle orders the queue by (the engine's fairshare)."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.utils import timezone

import scheduler_core as engine
from controlplane.models import Team
from controlplane.services import cycle
from controlplane.services.snapshot import read_snapshot, scheduler_config
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db

WEEK = 7 * 86400.0


def test_fair_share_lists_every_team_lowest_first_with_its_parts(fleet) -> None:
    now = timezone.now()
    f.make_job(fleet.ml, fleet.research, name="big", gpus=16, cpus_per_gpu=4, memory_gb_per_gpu=64,
               submitted_at=now - timedelta(minutes=1))
    assert cycle.run_cycle("w").binds == 1
    # vision used 480 GPU-hours, decayed to now already
    Team.objects.filter(pk=fleet.vision.pk).update(decayed_gpu_seconds=480 * 3600.0, usage_as_of=timezone.now())

    body = client_for(fleet, "other_team").get("/api/v1/scheduler/fair-share/").json()

    assert body["half_life_s"] == WEEK
    rows = {row["team"]: row for row in body["teams"]}
    assert set(rows) == {"ml", "vision"}
    ml, vision = rows["ml"], rows["vision"]
    assert ml["held_now"] == {"gpus": 16, "cpus": 64, "memory_gb": 1024}
    # 6 nodes: 48 GPUs, 576 CPUs, 6,144 GB; ml's used GPU-hours so far are a minute's at most
    assert ml["shares"]["gpus"] == pytest.approx(16 / 48, abs=1e-3)
    assert ml["shares"]["memory"] == pytest.approx(1024 / 6144, abs=1e-3)
    assert (ml["dominant_resource"], ml["dominant_share"]) == ("gpus", max(ml["shares"].values()))
    assert vision["held_now"] == {"gpus": 0, "cpus": 0, "memory_gb": 0}
    assert vision["decayed_usage"]["gpu_hours"] == pytest.approx(480, rel=1e-3)
    assert vision["shares"]["gpus"] == pytest.approx(480 * 3600.0 * math.log(2) / WEEK / 48, rel=1e-3)
    # lowest first: vision's 480 GPU-hours over a week's half-life weigh less than ml's 16 GPUs now
    assert [row["team"] for row in body["teams"]] == ["vision", "ml"]
    # the shares the queue is ordered by
    snapshot = read_snapshot(timezone.now(), 0).snapshot
    queue_shares = engine.snapshot_fair_shares(snapshot, scheduler_config())
    assert ml["dominant_share"] == pytest.approx(queue_shares["ml"].dominant_share, rel=1e-3)


def test_fair_share_is_for_signed_in_users(fleet) -> None:
    assert client_for(fleet, "anonymous").get("/api/v1/scheduler/fair-share/").status_code == 401
    assert client_for(fleet, "finance").get("/api/v1/scheduler/fair-share/").status_code == 200
