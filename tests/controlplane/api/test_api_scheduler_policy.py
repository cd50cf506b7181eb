"""`GET /api/v1/scheduler/policy/` (`scontrol show config`): every setting of the engine as the
loop runs it, the loop's timings and the leader; `qm config` prints them."""

from __future__ import annotations

import dataclasses

import pytest
from rest_framework.test import APIClient

from controlplane.services import cycle
from controlplane.services.snapshot import scheduler_config
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> APIClient:
    client = APIClient()
    client.force_authenticate(f.make_user("alice"))  # any signed-in user reads the policy
    return client


def test_the_policy_is_every_engine_setting_as_the_loop_runs_it(api, settings):
    settings.QM = {**settings.QM, "PLACEMENT_POLICY": "spread", "FAIR_SHARE_HALF_LIFE_S": 3 * 86400.0}
    body = api.get("/api/v1/scheduler/policy/").json()
    engine = body["engine"]
    assert set(engine) == {field.name for field in dataclasses.fields(scheduler_config())}
    assert engine["placement_by_workload"] == {"training": "spread", "batch": "spread", "interactive": "spread",
                                               "serving": "spread"}
    assert engine["fair_share_half_life_s"] == 3 * 86400.0 and engine["queue_order"] == "priority_fair_share"
    assert engine["resize_restarts"] is True and engine["locality_weights"] == [0.0, 1.0, 10.0, 30.0]
    assert body["loop"]["cycle_interval_s"] == settings.QM["CYCLE_INTERVAL_S"]
    assert body["leader"] is None  # no cycle has run


def test_the_leader_is_said_once_a_cycle_ran(api):
    cycle.run_cycle("worker-7")
    leader = api.get("/api/v1/scheduler/policy/").json()["leader"]
    assert leader["holder"] == "worker-7" and leader["epoch"] >= 1 and leader["cycles"] >= 1
    assert leader["last_cycle_at"] is not None


def test_the_policy_takes_no_parameter(api):
    response = api.get("/api/v1/scheduler/policy/", {"verbose": "1"})
    assert response.status_code == 400 and list(response.json()["errors"]) == ["verbose"]


def test_the_policy_needs_a_signed_in_user():
    assert APIClient().get("/api/v1/scheduler/policy/").status_code in (401, 403)
