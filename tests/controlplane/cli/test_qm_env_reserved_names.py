"""`qm submit --env QM_ROLE=boss` (or a job file's `env: {RANK: ...}`) set a name Quartermaster
sets for each process and was taken: refused now, naming env and the name (a field spelled as its
flag is named alone, as `gpus` is)."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_a_reserved_env_name_is_refused_naming_it(alice_qm) -> None:
    r = alice_qm("submit", "--name", "x", "--gpus", "1", "--env", "LR=0.1", "--env", "QM_ROLE=boss", "--", "true")

    assert r.code == 1 and r.out == ""
    assert r.err == ("error: Invalid request.\n  env: env QM_ROLE is set by Quartermaster for each process; "
                     "choose another name\n")
    assert not Job.objects.exists()


def test_a_job_files_reserved_env_name_is_refused_too(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: filed\ngpus: 1\ncommand: python train.py\nenv:\n  RANK: '0'\n  QM_LAUNCH: per_node\n")

    r = alice_qm("submit", str(spec))

    assert r.code == 1
    assert r.err == ("error: Invalid request.\n  env: env RANK is set by Quartermaster for each process; "
                     "choose another name\n")
    assert not Job.objects.exists()
