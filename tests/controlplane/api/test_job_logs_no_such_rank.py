"""A rank a run never had is a 400 naming `rank`: `qm logs 1 --rank 5` of a 1-GPU job said
"Rank 5 of generation 49 has written nothing yet; ranks with output: 0." and exited 0, as if it
might still write (and `qm logs -f --rank 5` waited for ever). A rank the run has that has not
written yet keeps its notice. Ranks are the run's GPUs, or its nodes with QM_LAUNCH=per_node."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    bind,
    build_loop_fleet,
    make_job,
    register_node,
)

pytestmark = pytest.mark.django_db
J = "/api/v1"


@pytest.fixture(autouse=True)
def _fast_hashing_and_bootstrap(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP}


@pytest.fixture
def fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()


@pytest.fixture
def alice(fleet: LoopFleet) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {f.token_for(f.make_user('alice', team=fleet.team))}")
    return client


def test_a_rank_beyond_the_runs_gpus_is_a_400_naming_rank(fleet: LoopFleet, alice: APIClient) -> None:
    node, _ = register_node("gpu-01")
    job = make_job(fleet, gpus=2)
    g = bind(job, {node: [0, 1]}).generation

    beyond = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 5})
    quiet = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 1})

    assert beyond.status_code == 400, beyond.content
    assert beyond.json()["errors"] == {"rank": [f"Generation {g} of job {job.pk} has 2 ranks (0–1): there is no rank 5."]}
    assert quiet.status_code == 200 and quiet.json()["notice"] == f"Generation {g} of job {job.pk} has written nothing yet."


def test_per_node_launch_has_a_rank_a_node(fleet: LoopFleet, alice: APIClient) -> None:
    one, _ = register_node("gpu-01")
    two, _ = register_node("gpu-02")
    job = make_job(fleet, gpus=4, env={"QM_LAUNCH": "per_node"})
    g = bind(job, {one: [0, 1], two: [0, 1]}).generation

    assert alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 1}).status_code == 200
    beyond = alice.get(f"{J}/jobs/{job.pk}/logs/", {"rank": 2})
    assert beyond.status_code == 400
    assert beyond.json()["errors"]["rank"] == [f"Generation {g} of job {job.pk} has 2 ranks (0–1): there is no rank 2."]


def test_the_job_page_says_it_on_its_output_panel(fleet: LoopFleet, alice: APIClient, client) -> None:
    node, _ = register_node("gpu-01")
    job = make_job(fleet, gpus=1)
    bind(job, {node: [0]})
    client.force_login(f.make_user("carol", team=fleet.team))

    page = client.get(f"/jobs/{job.pk}/", {"rank": 3}).content.decode()

    assert "there is no rank 3." in page
