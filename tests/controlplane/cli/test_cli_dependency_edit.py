"""`qm update JOB -d +=afterok:5` / `-d -=afterany:7` (scontrol update dependency+= / -=) and
`qm submit -d singleton`: checked locally by the one parser, sent as the API's text, applied by
the server to the list as it is; a refusal names the option; `qm status` says singleton."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from controlplane.cli.client import CliError
from controlplane.cli.jobs.dependencies import update_dependency
from controlplane.models import Event, Job, JobDependency
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def deps(job: Job) -> list[tuple[int, str]]:
    return sorted(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition"))


def test_update_dependency_reads_an_edit_as_the_apis_text() -> None:
    assert update_dependency("+=afterok:5") == "+afterok:5"
    assert update_dependency("-=afterany:7:8,singleton") == "-afterany:7:8,singleton"
    assert update_dependency("-afterany:7") == "-afterany:7"
    assert update_dependency("afterok:5") == [{"job": 5, "condition": "afterok"}]  # the whole list
    with pytest.raises(CliError, match=r"--dependency \+=: '\+' names nothing to add"):
        update_dependency("+=")
    with pytest.raises(CliError, match="is not TYPE:JOB"):
        update_dependency("-=afterwhen:3")


def test_plus_equals_adds_and_minus_equals_removes(alice_qm, fleet) -> None:
    pre, other = f.make_job(fleet.ml, name="pre"), f.make_job(fleet.ml, name="other")
    assert alice_qm("submit", "--name", "train", "--gpus", "1", "-d", f"afterok:{pre.pk}").code == 0
    job = Job.objects.get(name="train")

    r = alice_qm("update", str(job.pk), "-d", f"+=afterany:{other.pk}")

    assert r.code == 0, r.err
    assert deps(job) == [(pre.pk, "afterok"), (other.pk, "afterany")]
    assert r.out.strip() == (f"Job {job.pk} changed: dependencies afterok:{pre.pk} → "
                             f"afterok:{pre.pk},afterany:{other.pk}.")

    r = alice_qm("update", str(job.pk), "-d", f"-=afterok:{pre.pk}")  # argparse would take -=… for a flag

    assert r.code == 0, r.err
    assert deps(job) == [(other.pk, "afterany")]


def test_removing_one_that_is_not_there_names_the_option(alice_qm, fleet) -> None:
    pre = f.make_job(fleet.ml, name="pre")
    assert alice_qm("submit", "--name", "train", "--gpus", "1").code == 0
    job = Job.objects.get(name="train")

    r = alice_qm("update", str(job.pk), "-d", f"-afterok:{pre.pk}")

    assert r.code == 1
    assert "--dependency" in r.err and f"afterok:{pre.pk} is not among job {job.pk}'s dependencies (none)" in r.err
    assert not Event.objects.filter(job=job, kind="job.updated").exists()


def test_submit_singleton_and_status_says_it(alice_qm, fleet) -> None:
    running = f.make_job(fleet.ml, name="train", state=JobState.RUNNING, submitter=fleet.users["owner"])

    r = alice_qm("submit", "--name", "train", "--gpus", "1", "-d", "singleton")

    assert r.code == 0, r.err
    assert "runs after singleton (one job named 'train' of its submitter at a time)" in r.out
    job = Job.objects.filter(name="train", singleton=True).get()
    status = alice_qm("status", str(job.pk))
    assert status.code == 0, status.err
    assert "singleton (one job named 'train'" in status.out
    assert f"Waits for job {running.pk} to end (now running; same name “train”, singleton)" in status.out
