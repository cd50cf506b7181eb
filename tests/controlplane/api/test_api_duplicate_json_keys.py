"""A JSON body that gives one key twice in one object is a 400 naming the key, and writes
nothing. Until 7 Dec the last one silently won (Python's json), so `{"memory_gb": 40,
"memory_gb": 80}` stored 80 and `{"gpus": 1, ..., "gpus": 64}` queued a 64-GPU job, while
another reader of the same body (a proxy, an audit log, a client library) may take the first:
RFC 8259 leaves such a body's meaning to each reader."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.models import GpuType, Job
from tests.controlplane.fleet_fixture import Fleet

pytestmark = pytest.mark.django_db


def test_a_field_given_twice_in_a_change_is_refused_naming_it(admin: APIClient, fleet: Fleet) -> None:
    r = admin.patch(f"/api/v1/gpu-types/{fleet.h100.pk}/", '{"memory_gb": 40, "memory_gb": 96}',
                    content_type="application/json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert "'memory_gb' is given twice" in r.json()["detail"], r.json()
    assert GpuType.objects.get(pk=fleet.h100.pk).memory_gb == 80


def test_a_key_given_twice_inside_a_submit_is_refused_and_queues_nothing(alice: APIClient, fleet: Fleet) -> None:
    body = ('{"team": "ml", "name": "train", "gpus": 1, "command": "python train.py", '
            '"env": {"SEED": "1", "SEED": "2"}}')

    r = alice.post("/api/v1/jobs/", body, content_type="application/json")

    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert "'SEED' is given twice" in r.json()["detail"], r.json()
    assert not Job.objects.exists()


def test_the_same_key_in_two_objects_is_no_duplicate(alice: APIClient, fleet: Fleet) -> None:
    body = ('{"team": "ml", "name": "gang", "gpus": 3, "command": "x", "roles": ['
            '{"name": "trainer", "count": 1, "gpus_per_member": 2}, {"name": "rollout", "count": 1, '
            '"gpus_per_member": 1}]}')

    r = alice.post("/api/v1/jobs/", body, content_type="application/json")

    assert r.status_code == 201, r.json()
