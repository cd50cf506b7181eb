"""`qm hold`, `qm release`, `qm update` and `qm submit --hold` against a live server."""

from __future__ import annotations

from controlplane.choices import EventKind, JobHold, JobState
from controlplane.models import Event, Job
from tests.controlplane import factories as f


def _submitted(alice_qm, *args: str) -> Job:
    run = alice_qm("submit", "--name", "train", "--gpus", "4", *args, "--json")
    assert run.code == 0, run.err
    return Job.objects.get(pk=run.json()["id"])


def test_submit_hold_then_release_with_qm(alice_qm, fleet) -> None:
    job = _submitted(alice_qm, "--hold")
    assert Job.objects.get(pk=job.pk).hold == JobHold.USER

    listed = alice_qm("status", str(job.pk))
    assert listed.code == 0, listed.err
    assert "pending (held)" in listed.out and "Held by alice" in listed.out

    run = alice_qm("release", str(job.pk))
    assert run.code == 0, run.err
    assert run.out == f"Job {job.pk} released: it is back in the queue from the next scheduling cycle.\n"
    assert Job.objects.get(pk=job.pk).hold == JobHold.NONE


def test_qm_submit_hold_says_it_is_held_and_how_to_queue_it(alice_qm, fleet) -> None:
    run = alice_qm("submit", "--name", "later", "--gpus", "2", "-H")
    assert run.code == 0, run.err
    job = Job.objects.get(name="later")
    assert run.out == (f"Submitted job {job.pk} (later): 2 GPUs, priority research, team ml, limit 4 h, pending and "
                       f"held: `qm release {job.pk}` to queue it.\n")


def test_qm_hold_of_several_jobs_one_running_holds_none_and_says_what_to_do(alice_qm, fleet) -> None:
    """Every job is read first: the running one is named, with what to do instead, and the
    waiting one is left as it was (until 7 Dec it was held and the running one refused alone)."""
    waiting = _submitted(alice_qm)
    running = f.make_job(fleet.ml, state=JobState.RUNNING)

    run = alice_qm("hold", str(waiting.pk), str(running.pk))

    assert run.code == 1 and run.out == ""
    assert f"error: Job {running.pk} is running: only a waiting job can be held." in run.err
    assert "cancel it (qm cancel" in run.err
    assert "nothing held: the other job named is left as it was" in run.err
    assert Job.objects.get(pk=waiting.pk).hold == JobHold.NONE


def test_qm_hold_refuses_a_word_that_is_not_a_job_id_before_holding_anything(alice_qm, fleet) -> None:
    job = _submitted(alice_qm)
    run = alice_qm("hold", str(job.pk), "nine")
    assert run.code == 2 and "'nine' is not a job id" in run.err
    assert Job.objects.get(pk=job.pk).hold == JobHold.NONE


def test_qm_update_changes_a_waiting_job_with_submits_flags(alice_qm, fleet) -> None:
    job = _submitted(alice_qm)

    run = alice_qm("update", str(job.pk), "--gpus", "8", "--time-limit", "2h", "--priority", "production")

    assert run.code == 0, run.err
    assert run.out == (f"Job {job.pk} changed: priority class research → production, runtime limit 4 h → 2 h, "
                       "GPUs 4 → 8.\n")
    job.refresh_from_db()
    assert (job.gpus, job.runtime_limit_s, job.priority_class.name) == (8, 7200, "production")
    assert Event.objects.filter(job=job, kind=EventKind.JOB_UPDATED).count() == 1


def test_qm_update_refusal_names_the_field_and_the_flag(alice_qm, fleet) -> None:
    job = _submitted(alice_qm)

    run = alice_qm("update", str(job.pk), "--time", "30d")

    assert run.code == 1
    assert run.err == ("error: Invalid request.\n  runtime_limit_s (--time 30d): 2592000 s (30 d) is beyond "
                       "the maximum of priority class 'research' (604800 s), which is 7 d\n"), run.err


def test_qm_update_of_a_running_jobs_gpus_says_it_runs(alice_qm, fleet) -> None:
    running = f.make_job(fleet.ml, state=JobState.RUNNING)
    run = alice_qm("update", str(running.pk), "--gpus", "2")
    assert run.code == 1
    assert run.err == f"error: Job {running.pk} is running: only its name and runtime limit can change now, not GPUs.\n"


def test_qm_update_with_nothing_to_change_says_what_it_takes(alice_qm, fleet) -> None:
    job = _submitted(alice_qm)
    run = alice_qm("update", str(job.pk))
    assert run.code == 2 and run.err.startswith("error: name what to change: --gpus, --time")


def test_qm_hold_and_release_an_array(alice_qm, fleet) -> None:
    submitted = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-2", "--json")
    array_id = submitted.json()["array_id"]

    held = alice_qm("hold", "--array", array_id)
    assert held.code == 0, held.err
    assert held.out == f"Array {array_id} (sweep, 3 tasks): 3 held.\n"
    released = alice_qm("release", "--array", array_id, "--json")
    assert released.code == 0 and len(released.json()["changed"]) == 3
    assert set(Job.objects.filter(array_id=array_id).values_list("hold", flat=True)) == {""}
