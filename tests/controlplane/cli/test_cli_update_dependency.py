"""`qm update JOB -d afterok:12,afterany:14` (Slurm's `scontrol update dependency=`): the same
parser as `qm submit -d` builds the whole new list, `-d none` removes them all, and a refusal
names the option and the item."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from controlplane.cli.jobs.dependencies import parse_dependency
from controlplane.models import Event, Job, JobDependency
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def deps(job: Job) -> list[tuple[int, str]]:
    return sorted(JobDependency.objects.filter(job=job).values_list("upstream_id", "condition"))


def test_none_is_no_dependency_and_stands_alone() -> None:
    assert parse_dependency("none") == []
    assert parse_dependency(" None ") == []


def test_update_replaces_the_dependencies_and_says_old_and_new(alice_qm, fleet) -> None:
    pre, other = f.make_job(fleet.ml, name="pre"), f.make_job(fleet.ml, name="other")
    assert alice_qm("submit", "--name", "train", "--gpus", "1", "-d", f"afterok:{pre.pk}").code == 0
    job = Job.objects.get(name="train")

    r = alice_qm("update", str(job.pk), "-d", f"afterok:{pre.pk},afterany:{other.pk}")

    assert r.code == 0, r.err
    assert deps(job) == [(pre.pk, "afterok"), (other.pk, "afterany")]
    assert r.out.strip() == (f"Job {job.pk} changed: dependencies afterok:{pre.pk} → "
                             f"afterok:{pre.pk},afterany:{other.pk}.")


def test_update_none_removes_them_all(alice_qm, fleet) -> None:
    pre = f.make_job(fleet.ml, name="pre", state=JobState.RUNNING)
    assert alice_qm("submit", "--name", "train", "--gpus", "1", "-d", f"after:{pre.pk}").code == 0
    job = Job.objects.get(name="train")

    r = alice_qm("update", str(job.pk), "-d", "none")

    assert r.code == 0, r.err
    assert deps(job) == []
    assert f"dependencies after:{pre.pk} → none" in r.out


def test_bad_syntax_never_reaches_the_server(alice_qm, fleet) -> None:
    assert alice_qm("submit", "--name", "train", "--gpus", "1").code == 0
    job = Job.objects.get(name="train")

    r = alice_qm("update", str(job.pk), "-d", "afterok:12?afterok:13,afterok:14")

    assert r.code == 2 and ("--dependency afterok:12?afterok:13,afterok:14: ',' (every one met) and '?' (any one of "
                            "them met) cannot be mixed") in r.err
    assert not Event.objects.filter(job=job, kind="job.updated").exists()


def test_a_refused_dependency_names_the_option_and_the_item(alice_qm, fleet) -> None:
    assert alice_qm("submit", "--name", "train", "--gpus", "1").code == 0
    job = Job.objects.get(name="train")
    other = f.make_job(fleet.ml, name="other")

    r = alice_qm("update", str(job.pk), "-d", f"afterok:{other.pk},afterany:{job.pk}")

    assert r.code == 1
    assert r.err == ("error: Invalid request.\n"
                     f"  dependencies.1.job (-d afterok:{other.pk},afterany:{job.pk}): job {job.pk} is this "
                     "job: a job cannot wait on itself\n")
    assert deps(job) == []


def test_a_running_job_is_refused_saying_why(alice_qm, fleet) -> None:
    assert alice_qm("submit", "--name", "train", "--gpus", "1").code == 0
    job = Job.objects.get(name="train")
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)

    r = alice_qm("update", str(job.pk), "-d", "none")

    assert r.code == 1 and f"Job {job.pk} is running: only its name and runtime limit can change now, not " \
                           "dependencies." in r.err


def test_a_rename_closing_a_cycle_through_a_singleton_is_refused_on_name(alice_qm, fleet) -> None:
    """`qm update --name`: job X waits afterok on S, a singleton named “n” submitted after it;
    renamed “n”, X would hold S up and S would never end."""
    assert alice_qm("submit", "--name", "a", "--gpus", "1").code == 0
    x = Job.objects.get(name="a")
    assert alice_qm("submit", "--name", "n", "--gpus", "1", "-d", "singleton").code == 0
    s = Job.objects.get(name="n")
    assert alice_qm("update", str(x.pk), "-d", f"afterok:{s.pk}").code == 0

    r = alice_qm("update", str(x.pk), "--name", "n")

    assert r.code == 1
    assert (f"  name (--name n): named “n”, job {x.pk} would wait on itself: job {x.pk} waits on job {s.pk} (afterok), which "
            f"waits on job {x.pk} (singleton, same name “n”): a cycle, neither could ever start") in r.err, r.err
    assert Job.objects.get(pk=x.pk).name == "a"

    assert alice_qm("update", str(x.pk), "--name", "b").code == 0  # a name closing nothing is taken
    assert Job.objects.get(pk=x.pk).name == "b"


def test_submit_and_update_take_any_of_with_question_marks(alice_qm, fleet) -> None:
    """`qm submit -d 'afterok:12?afterok:13'` and `qm update -d`: any one of them met is enough;
    `qm status` says "any of"."""
    a = f.make_job(fleet.ml, name="a", state=JobState.RUNNING)
    b, c = f.make_job(fleet.ml, name="b"), f.make_job(fleet.ml, name="c")

    r = alice_qm("submit", "--name", "eval", "--gpus", "1", "-d", f"afterok:{a.pk}?afterok:{b.pk}")

    assert r.code == 0, r.err
    job = Job.objects.get(name="eval")
    assert job.dependency_mode == "any" and deps(job) == [(a.pk, "afterok"), (b.pk, "afterok")]
    r = alice_qm("status", str(job.pk))
    assert f"any of: job {a.pk} succeeds (running) or job {b.pk} succeeds (pending)" in r.out, r.out

    r = alice_qm("update", str(job.pk), "-d", f"afterok:{b.pk}?afterany:{c.pk}")

    assert r.code == 0, r.err
    assert r.out.strip() == (f"Job {job.pk} changed: dependencies afterok:{a.pk}?afterok:{b.pk} → "
                             f"afterok:{b.pk}?afterany:{c.pk}.")
    assert Job.objects.get(pk=job.pk).dependency_mode == "any"
    r = alice_qm("update", str(job.pk), "-d", f"+afterok:{a.pk}")
    assert r.code == 0, r.err
    assert f"→ afterok:{a.pk}?afterok:{b.pk}?afterany:{c.pk}." in r.out
