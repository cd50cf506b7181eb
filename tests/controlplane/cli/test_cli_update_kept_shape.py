"""`qm update JOB --gpus 4` of a job submitted with 8 GPUs per node: the submit's rule refused it
with "gpus_per_node 8 is more than gpus 4: give at most 4, or leave it out", and there was
nothing to leave out (the 8 is the job's, kept from its submit) nor a way to clear it
(`--gpus-per-node` took numbers only). The refusal now says the value is the job's, kept by
this change, and how to change it in the same update; `--gpus-per-node none` clears it (the
scheduler decides), as `--min-gpus none`/`--max-gpus none` clear an elastic range."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_a_kept_gpus_per_node_is_said_as_the_jobs_and_none_clears_it(alice_qm, fleet) -> None:
    assert alice_qm("submit", "--name", "wide", "--gpus", "8", "--gpus-per-node", "8").code == 0
    job = Job.objects.get(name="wide")

    refused = alice_qm("update", str(job.pk), "--gpus", "4")

    assert refused.code != 0
    assert (f"gpus_per_node 8 is more than gpus 4; gpus_per_node 8 is the job's own, which this change keeps: "
            f"change it in the same update (gpus_per_node: a number, or null to clear it; "
            f"qm update {job.pk} --gpus-per-node N|none)") in refused.err, refused.err
    assert "leave it out" not in refused.err
    assert Job.objects.get(pk=job.pk).gpus == 8  # nothing changed

    r = alice_qm("update", str(job.pk), "--gpus", "4", "--gpus-per-node", "none")

    assert r.code == 0, r.err
    job.refresh_from_db()
    assert (job.gpus, job.gpus_per_node) == (4, None)


def test_a_change_of_the_field_itself_keeps_the_submits_words(alice_qm, fleet) -> None:
    assert alice_qm("submit", "--name", "narrow", "--gpus", "4").code == 0
    job = Job.objects.get(name="narrow")

    refused = alice_qm("update", str(job.pk), "--gpus-per-node", "8")

    assert "gpus_per_node 8 is more than gpus 4: give at most 4, or leave it out" in refused.err, refused.err


def test_none_is_only_for_update_and_a_word_is_refused_on_the_flag(alice_qm, fleet) -> None:
    assert alice_qm("submit", "--name", "x", "--gpus", "1", "--gpus-per-node", "none").code != 0
    assert alice_qm("submit", "--name", "y", "--gpus", "1").code == 0
    r = alice_qm("update", str(Job.objects.get(name="y").pk), "--gpus-per-node", "many")
    assert r.code != 0 and "'many' is not a number of GPUs, nor none" in r.err, r.err
