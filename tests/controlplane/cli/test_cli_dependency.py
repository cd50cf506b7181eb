"""`qm submit --dependency afterok:12:13,afterany:14` (Slurm's syntax, parsed by qm into the API's
list), refusals naming the option, and `qm status` saying what a job runs after and who waits on
it."""

from __future__ import annotations

import re

import pytest

from controlplane.choices import JobState
from controlplane.cli.client import CliError
from controlplane.cli.jobs.dependencies import parse_dependency
from controlplane.models import Job, JobDependency
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_slurm_syntax_becomes_the_api_list() -> None:
    assert parse_dependency("afterok:12:13,afterany:14") == [
        {"job": 12, "condition": "afterok"}, {"job": 13, "condition": "afterok"},
        {"job": 14, "condition": "afterany"},
    ]
    uid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    assert parse_dependency(f"after:{uid}") == [{"array": uid, "condition": "after"}]


@pytest.mark.parametrize(("text", "words"), [
    ("afterwards:12", "'afterwards:12' is not TYPE:JOB[:JOB...]"),
    ("afterok", "'afterok' names no job"),
    ("afterok:", "'afterok:' names no job"),
    ("afterok:12x", "'12x' is not a job id"),
    ("afterok:12?afterany:13,afterok:14", "',' (every one met) and '?' (any one of them met) cannot be mixed"),
    ("12", "'12' is not TYPE:JOB[:JOB...]"),
], ids=["unknown-type", "no-job", "empty-job", "bad-id", "any-of-mixed", "bare-id"])
def test_bad_syntax_is_refused_naming_the_option(text: str, words: str) -> None:
    with pytest.raises(CliError) as refused:
        parse_dependency(text)
    assert str(refused.value).startswith(f"--dependency {text}: ")
    assert words in str(refused.value)


def test_bad_syntax_never_reaches_the_server(alice_qm) -> None:
    r = alice_qm("submit", "--name", "x", "--gpus", "1", "--dependency", "afterok:abc")
    assert r.code == 2 and "--dependency afterok:abc: 'abc' is not a job id" in r.err
    assert not Job.objects.filter(name="x").exists()


def test_submit_with_dependencies_records_them_and_says_so(alice_qm, fleet) -> None:
    pre = f.make_job(fleet.ml, name="pre")
    other = f.make_job(fleet.ml, name="other", state=JobState.RUNNING)

    r = alice_qm("submit", "--name", "train", "--gpus", "1", "-d", f"afterok:{pre.pk},after:{other.pk}")

    assert r.code == 0, r.err
    job = Job.objects.get(name="train")
    assert sorted(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition")) == [
        (pre.pk, "afterok"), (other.pk, "after")]
    assert f"runs after job {pre.pk} succeeds (pending), job {other.pk} starts (met)" in r.out


def test_a_refused_dependency_names_the_option_and_the_item(alice_qm, fleet) -> None:
    failed = f.make_job(fleet.ml, name="failed", state=JobState.FAILED, exit_code=3)

    r = alice_qm("submit", "--name", "train", "--gpus", "1", "--dependency", f"afterok:{failed.pk}")

    assert r.code == 1
    assert f"  dependencies.0.condition (--dependency afterok:{failed.pk}): job {failed.pk} failed (exit 3)" in r.err


def test_status_says_what_it_runs_after_and_who_waits_on_it(alice_qm, fleet) -> None:
    pre = f.make_job(fleet.ml, name="pre", state=JobState.RUNNING)
    assert alice_qm("submit", "--name", "train", "--gpus", "1", "-d", f"afterok:{pre.pk}").code == 0
    train = Job.objects.get(name="train")

    down = alice_qm("status", str(train.pk))
    up = alice_qm("status", str(pre.pk))

    assert re.search(rf"^runs after: +job {pre.pk} succeeds \(running\)$", down.out, re.M), down.out
    assert re.search(rf"^waited on by: +job {train.pk}$", up.out, re.M), up.out


def test_submit_an_array_after_another_task_by_task(alice_qm, fleet) -> None:
    """`qm submit --array 0-2 -d aftercorr:ARRAY_ID`: task i waits for task i of that array."""
    assert parse_dependency("aftercorr:0f8fad5b-d9cb-469f-a165-70867728950e") == [
        {"array": "0f8fad5b-d9cb-469f-a165-70867728950e", "condition": "aftercorr"}]
    assert alice_qm("submit", "--name", "prep", "--gpus", "1", "--array", "0-2").code == 0
    up = {t.array_index: t for t in Job.objects.filter(name="prep")}
    array_id = up[0].array_id

    r = alice_qm("submit", "--name", "train", "--gpus", "1", "--array", "0-2", "-d", f"aftercorr:{array_id}")

    assert r.code == 0, r.err
    for task in Job.objects.filter(name="train"):
        assert list(JobDependency.objects.filter(job=task).values_list("upstream_id", "condition")) == [
            (up[task.array_index].pk, "afterok")]
    r = alice_qm("submit", "--name", "one", "--gpus", "1", "-d", f"aftercorr:{array_id}")
    assert r.code == 1 and "aftercorr is for a job array" in r.err


def test_runs_after_says_an_upstream_state_in_words_as_the_page() -> None:
    # "job 218 succeeds (timed_out)": the state's API name, where the job page said "now timed out".
    from controlplane.cli.jobs.dependencies import runs_after

    job = {"name": "eval", "dependency_mode": "any", "dependencies": [
        {"job": 218, "condition": "afterok", "state": "timed_out", "satisfied_at": None},
        {"job": 219, "condition": "afterany", "state": "unschedulable", "satisfied_at": None},
        {"job": 220, "condition": "afterok", "state": "running", "satisfied_at": None}]}

    assert runs_after(job) == ("any of: job 218 succeeds (timed out) or job 219 ends (can never run) or "
                               "job 220 succeeds (running)")
