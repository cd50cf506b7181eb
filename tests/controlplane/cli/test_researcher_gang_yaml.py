"""`qm submit gang.yaml` with `roles:` (a heterogeneous gang: a learner and its rollout workers)
was refused by the API ("roles: Unknown field"); the YAML file now carries the roles as the API
takes them, `gpus` may be left out (qm adds up the roles), and `qm status` says the roles."""

from __future__ import annotations

import pytest

from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow

GANG = """\
name: rlhf
time: 2h
roles:
  - name: learner
    count: 1
    gpus_per_member: 8
    gpu_type: H100-80GB
  - name: rollout
    count: 4
    gpus_per_member: 1
    gpu_types: [A100-40GB]
command: [python, rlhf.py]
"""


def test_a_gang_from_yaml_is_submitted_and_its_roles_shown(alice_qm, fleet, tmp_path) -> None:
    f.make_quota(fleet.ml, fleet.a100, 8)
    spec = tmp_path / "gang.yaml"
    spec.write_text(GANG)

    submitted = alice_qm("submit", str(spec))

    assert submitted.code == 0, submitted.err
    job = Job.objects.get()
    assert submitted.out.startswith(f"Submitted job {job.pk} (rlhf): 12 GPUs")
    assert [(r["name"], r["count"], r["gpus_per_member"]) for r in job.roles] == [("learner", 1, 8), ("rollout", 4, 1)]
    status = alice_qm("status", str(job.pk))
    assert "roles:" in status.out
    line = next(line for line in status.out.splitlines() if line.startswith("roles:"))
    assert line.split(":", 1)[1].strip() == "learner 1×8 GPUs (of H100-80GB) + rollout 4×1 GPU (of A100-40GB)"


def test_a_gang_whose_gpus_disagree_is_refused_naming_gpus(alice_qm, fleet, tmp_path) -> None:
    spec = tmp_path / "gang.yaml"
    spec.write_text(GANG + "gpus: 9\n")

    refused = alice_qm("submit", str(spec))

    assert refused.code == 1
    assert "gpus: gpus 9 is not the sum of its roles' GPUs" in refused.err
    assert not Job.objects.exists()


def test_role_keys_may_be_written_with_dashes_like_the_top_levels(alice_qm, fleet, tmp_path) -> None:
    f.make_quota(fleet.ml, fleet.a100, 8)
    spec = tmp_path / "gang.yaml"
    spec.write_text(GANG.replace("gpus_per_member", "gpus-per-member").replace("gpu_type", "gpu-type"))

    submitted = alice_qm("submit", str(spec))

    assert submitted.code == 0, submitted.err
    assert [r["gpus_per_member"] for r in Job.objects.get().roles] == [8, 1]
