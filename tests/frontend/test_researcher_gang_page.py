"""A heterogeneous gang's page says its roles under Shape (the GPUs of each role and their
types), and the jobs list says it is a gang of roles, not only "12 GPUs"."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db

ROLES = ({"name": "learner", "count": 1, "gpus_per_member": 8, "gpu_types": ["H100-80GB"]},
         {"name": "rollout", "count": 4, "gpus_per_member": 1, "gpu_types": ["A100-40GB"]})


def test_the_job_page_and_the_list_say_the_roles(client_for, submit_as) -> None:
    job = submit_as("alice", name="rlhf", gpus=12, roles=ROLES)
    client = client_for("alice")

    page = client.get(f"/jobs/{job.pk}/").content.decode()
    roles = re.search(r"<dt>Roles</dt><dd>(.*?)</dd>", page, flags=re.S)
    assert roles is not None
    assert roles.group(1) == "learner 1×8 GPUs (of H100-80GB) + rollout 4×1 GPU (of A100-40GB)"

    listed = client.get("/jobs/").content.decode()
    row = re.search(rf'<tr data-job="{job.pk}">(.*?)</tr>', listed, flags=re.S)
    assert row is not None and "12 GPUs · 2 roles" in row.group(1)


def test_a_job_without_roles_shows_none(client_for, submit_as) -> None:
    job = submit_as("alice", name="plain", gpus=8)
    assert "<dt>Roles</dt>" not in client_for("alice").get(f"/jobs/{job.pk}/").content.decode()
