"""The flags a Slurm user types without looking, taken under qm's own names: sbatch's `-J` and
`--job-name` (qm's --name), `-G` (--gpus), `--mem-per-gpu` (--memory-per-gpu), `-A` and
`--account` (the team: --team), `--wrap CMD` (the command after --); squeue's `--me` (--mine) and
`-A`; sacct's `-A`; scontrol update's `-J`. Each was "unrecognized arguments"."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _ids(out: str) -> set[int]:
    return {int(m.group(1)) for m in re.finditer(r"^\s*(\d+)\s+(?!jobs? ended)", out, re.M)}


def test_sbatch_spellings_submit_the_same_job(alice_qm, fleet) -> None:
    run = alice_qm("submit", "-J", "sweep-lr", "-G", "2", "--mem-per-gpu", "32", "-A", "ml",
                   "--wrap", "python a.py && python b.py", "--parsable")

    assert run.code == 0, run.err
    job = Job.objects.get(pk=int(run.out))
    assert (job.name, job.gpus, job.memory_gb_per_gpu, job.team.name, job.command) == (
        "sweep-lr", 2, 32, "ml", "python a.py && python b.py")
    other = alice_qm("submit", "--job-name", "eval", "--account", "ml", "-G", "1", "--parsable", "--", "true")
    assert other.code == 0, other.err
    assert Job.objects.get(pk=int(other.out)).name == "eval"


def test_wrap_and_a_command_after_dashes_are_one_too_many(alice_qm, fleet) -> None:
    both = alice_qm("submit", "-G", "1", "--wrap", "python a.py", "--", "python", "b.py")
    empty = alice_qm("submit", "-G", "1", "--wrap", " ")

    assert both.code == 2 and both.err.strip() == "error: give the command after -- or as --wrap, not both"
    assert empty.code == 2 and "--wrap is empty" in empty.err
    assert not Job.objects.exists()


def test_squeue_me_and_account_pick_as_mine_and_team(alice_qm, fleet) -> None:
    alice, bob, root = fleet.users["owner"], fleet.users["other_team"], fleet.users["admin"]
    mine = f.make_job(fleet.ml, name="mine", submitter=alice)
    f.make_job(fleet.ml, name="roots", submitter=root)
    f.make_job(fleet.vision, name="bobs", submitter=bob)

    assert _ids(alice_qm("squeue", "--me").out) == {mine.pk}
    assert _ids(alice_qm("squeue", "-A", "ml", "--me").out) == {mine.pk}
    refused = alice_qm("squeue", "--account", "vision")
    assert refused.code == 1 and "team (--account vision): no team named 'vision' whose jobs you may read" in refused.err


def test_sacct_account_and_update_job_name(alice_qm, fleet) -> None:
    now = timezone.now()
    ended = f.make_job(fleet.ml, name="done", submitter=fleet.users["owner"], state=JobState.SUCCEEDED,
                       exit_code=0, started_at=now, finished_at=now)
    waiting = f.make_job(fleet.ml, name="old-name", submitter=fleet.users["owner"])

    assert _ids(alice_qm("sacct", "--since", "1h", "-A", "ml").out) == {ended.pk}
    renamed = alice_qm("update", str(waiting.pk), "-J", "new-name")
    assert renamed.code == 0, renamed.err
    waiting.refresh_from_db()
    assert waiting.name == "new-name"
