"""`qm submit --idempotency-key K` run twice: the second run returned the first job (the API
answers 200 with `Idempotent-Replayed: true`), yet `qm` printed "Submitted job 14 …" both times,
as if a second job had been created. It now says the key was already used and nothing new was
submitted, for a job and for an array; a fresh key still says "Submitted"."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_a_replayed_job_submit_says_no_new_job_was_created(alice_qm) -> None:
    first = alice_qm("submit", "--name", "idem", "--gpus", "1", "--idempotency-key", "k1")
    again = alice_qm("submit", "--name", "idem", "--gpus", "1", "--idempotency-key", "k1")

    assert first.code == 0 and again.code == 0, (first.err, again.err)
    job = Job.objects.get()
    assert first.out.startswith(f"Submitted job {job.pk} (idem)")
    assert not again.out.startswith("Submitted"), again.out
    assert f"job {job.pk} (idem)" in again.out
    assert "k1" in again.out and "no new job" in again.out
    assert Job.objects.count() == 1


def test_a_replayed_array_submit_says_no_new_tasks_were_created(alice_qm) -> None:
    first = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-2", "--idempotency-key", "k2")
    again = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-2", "--idempotency-key", "k2")

    assert first.code == 0 and again.code == 0, (first.err, again.err)
    array_id = str(Job.objects.values_list("array_id", flat=True).distinct().get())
    assert first.out.startswith(f"Submitted array {array_id}")
    assert not again.out.startswith("Submitted"), again.out
    assert array_id in again.out and "k2" in again.out and "no new tasks" in again.out
    assert Job.objects.count() == 3


def test_a_fresh_key_each_time_submits_each_time(alice_qm) -> None:
    one = alice_qm("submit", "--name", "a", "--gpus", "1")
    two = alice_qm("submit", "--name", "a", "--gpus", "1")

    assert one.out.startswith("Submitted job") and two.out.startswith("Submitted job")
    assert Job.objects.count() == 2
