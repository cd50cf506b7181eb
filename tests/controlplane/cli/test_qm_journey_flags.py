"""Found walking a researcher's week with `qm` as a Slurm user would.

- `qm list` filters as squeue does (-u USER, -n NAME, -p/priority class, the project, the reason
  a job waits): the API took them all (`?user=`, `?name=`, ...) but qm offered only --mine.
- `qm submit gang.yaml` whose roles qm cannot add up (a member's `gpus:` for `gpus_per_member:`)
  said "a job needs --gpus", the one field qm fills in itself; the API now names each role's
  field at fault."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from controlplane.choices import WAITING_CODES, JobState
from controlplane.models import Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def _ids(out: str) -> set[int]:
    return {int(m.group(1)) for m in re.finditer(r"^\s*(\d+)\s", out, re.M)}


def test_list_filters_as_squeue_does(alice_qm, fleet) -> None:
    alice, root = fleet.users["owner"], fleet.users["admin"]
    mine = f.make_job(fleet.ml, name="sweep-lr", submitter=alice)
    theirs = f.make_job(fleet.ml, name="SWEEP-wd", submitter=root, project=fleet.llm)
    prod = f.make_job(fleet.ml, fleet.production, name="serve", submitter=alice, state=JobState.RUNNING,
                      started_at=timezone.now())
    quota = f.make_job(fleet.ml, name="big", submitter=alice, pending_code="QuotaExceeded")

    assert _ids(alice_qm("list", "-u", "root").out) == {theirs.pk}
    assert _ids(alice_qm("list", "--user", "alice").out) == {mine.pk, prod.pk, quota.pk}
    assert _ids(alice_qm("list", "-n", "sweep-lr").out) == {mine.pk}  # the whole name, as squeue -n
    assert _ids(alice_qm("list", "--project", "llm").out) == {theirs.pk}
    assert _ids(alice_qm("list", "-p", "production").out) == {prod.pk}
    assert _ids(alice_qm("list", "--reason", "QuotaExceeded").out) == {quota.pk}
    assert _ids(alice_qm("list", "-t", "running").out) == {prod.pk}
    assert _ids(alice_qm("status", "-u", "root", "-n", "SWEEP-wd").out) == {theirs.pk}
    sent = alice_qm("--json", "list", "-u", "alice", "-n", "big").json()
    assert [j["id"] for j in sent["results"]] == [quota.pk]


@pytest.mark.parametrize(("args", "message"), [
    (("--mine", "-u", "root"), "give --mine or --user USER, not both"),
    (("-u", " "), "--user is empty: give a user"),
    (("--reason", ""), "--reason is empty: give a reason code"),
])
def test_list_filters_given_wrong_are_refused(alice_qm, fleet, args, message) -> None:
    f.make_job(fleet.ml, name="any", submitter=fleet.users["owner"])

    run = alice_qm("list", *args)

    assert run.code == 2 and run.out == ""
    assert run.err.strip() == f"error: {message}"


GANG_WRONG_KEYS = """\
name: rlhf
roles:
  - name: learner
    gpus: 8
  - name: rollout
    count: 4
    gpus: 1
"""


def test_a_gang_whose_roles_qm_cannot_add_up_is_refused_naming_the_roles(alice_qm, fleet, tmp_path) -> None:
    spec = tmp_path / "gang.yaml"
    spec.write_text(GANG_WRONG_KEYS)

    refused = alice_qm("submit", str(spec))

    assert refused.code == 1
    assert "a job needs --gpus" not in refused.err
    lines = refused.err.strip().splitlines()
    assert lines[0] == "error: Invalid request."
    fields = [line.strip().split(":", 1)[0] for line in lines[1:]]
    assert fields == ["roles.0.count", "roles.0.gpus_per_member", "roles.0.gpus", "roles.1.gpus_per_member",
                      "roles.1.gpus"]
    assert "Unknown field. Accepted fields: count, cpus_per_gpu, gpu_type, gpu_types, gpus_per_member" in refused.err
    assert not Job.objects.exists()


def test_a_job_without_gpus_or_roles_still_asks_for_gpus(alice_qm, fleet) -> None:
    refused = alice_qm("submit", "--name", "x")

    assert refused.code == 2
    assert refused.err.strip() == "error: a job needs --gpus (or `gpus:` in the YAML file)"


def _position_line(out: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("queue position:"))


def test_a_job_not_in_line_says_where_its_position_puts_it(alice_qm, fleet) -> None:
    """Its reason says it "is not in the queue"; `queue position: 8` alone read as eighth in line.
    qm says what the job page says: a held job is ranked after every job in line; a job waiting
    for a dependency has no position (the engine gives it none), and qm says until what it is
    not in line, in the engine's words (until 6 Dec: "8, after every job in line (a job waiting
    for a dependency is not in line)")."""
    alice = fleet.users["owner"]
    waits = f.make_job(fleet.ml, name="eval", submitter=alice, pending_code="WaitingForDependency",
                       pending_message="Waits for job 1 to succeed (now running): until then it is not in the queue "
                                       "and holds nothing.", pending_would_start_if="job 1 succeeds",
                       queue_position=None)
    held = f.make_job(fleet.ml, name="later", submitter=alice, hold=True, held_at=timezone.now(), held_by=alice,
                      pending_code="Held", queue_position=9)
    never = f.make_job(fleet.ml, name="huge", submitter=alice, pending_code="CanNeverRun",
                       pending_resolvable=False, queue_position=7)
    in_line = f.make_job(fleet.ml, name="train", submitter=alice, pending_code="QuotaExceeded", queue_position=2)

    for command in ("explain", "status"):
        assert _position_line(alice_qm(command, str(waits.pk)).out) == "none: not in line until job 1 succeeds"
        assert _position_line(alice_qm(command, str(held.pk)).out) == (
            "9, after every job in line (a held job is not in line)")
        assert _position_line(alice_qm(command, str(never.pk)).out) == "7, after every job that can start"
        assert _position_line(alice_qm(command, str(in_line.pk)).out) == "2"


def test_cancel_by_name_state_and_user_as_scancel_does(alice_qm, fleet) -> None:
    """`scancel -n train`, `scancel -t pending`, `scancel -u bob`: qm cancel took only ids. The
    name is matched whole (the API's ?name= matches a part: `-n train` would have picked
    pretrain), and without --user only your own jobs are picked, as scancel does for a user."""
    alice, root = fleet.users["owner"], fleet.users["admin"]
    train = [f.make_job(fleet.ml, name="train", submitter=alice) for _ in range(2)]
    pretrain = f.make_job(fleet.ml, name="pretrain", submitter=alice)
    roots = f.make_job(fleet.ml, name="train", submitter=root)
    ended = f.make_job(fleet.ml, name="train", submitter=alice, state=JobState.SUCCEEDED, finished_at=timezone.now())
    other = f.make_job(fleet.ml, name="eval", submitter=alice)

    run = alice_qm("cancel", "-n", "train")

    assert run.code == 0, run.err
    assert run.out.splitlines() == [f"Job {job.pk} cancelled." for job in train]
    states = dict(Job.objects.values_list("pk", "state"))
    assert [states[j.pk] for j in train] == [JobState.CANCELLED] * 2
    assert states[pretrain.pk] == states[roots.pk] == states[other.pk] == JobState.PENDING
    assert states[ended.pk] == JobState.SUCCEEDED

    again = alice_qm("cancel", "-n", "train")
    assert again.code == 0 and again.out == "No job matched: nothing cancelled.\n"

    theirs = alice_qm("cancel", "-u", "root", "-t", "PENDING")
    assert theirs.code == 0, theirs.err
    assert theirs.out == f"Job {roots.pk} cancelled.\n"
    assert Job.objects.get(pk=other.pk).state == JobState.PENDING


@pytest.mark.parametrize(("args", "message"), [
    (("5", "-n", "train"), "give job ids, --array, or --name and the other filters, not both"),
    (("-t", "succeeded"), "--state succeeded: a job that is succeeded cannot be cancelled; give pending or running"),
    (("-n", " "), "--name is empty: give the jobs' name"),
    (("-u", ""), "--user is empty: give a user"),
])
def test_cancel_filters_given_wrong_cancel_nothing(alice_qm, fleet, args, message) -> None:
    job = f.make_job(fleet.ml, name="train", submitter=fleet.users["owner"])

    run = alice_qm("cancel", *args)

    assert run.code == 2
    assert run.err.strip() == f"error: {message}"
    assert Job.objects.get(pk=job.pk).state == JobState.PENDING


def test_a_refused_job_is_named_once(alice_qm, fleet) -> None:
    """`qm cancel 18` of another team's job said "error: job 18: No job 18, or not yours to see.",
    a running job's hold "error: job 1: Job 1 is running: …": the job named twice. A refusal that
    does not name the job keeps the prefix."""
    theirs = f.make_job(fleet.vision, name="bobs")
    running = f.make_job(fleet.ml, state=JobState.RUNNING, started_at=timezone.now())
    waiting = f.make_job(fleet.ml, submitter=fleet.users["owner"])

    cancel = alice_qm("cancel", str(theirs.pk))
    hold = alice_qm("hold", str(running.pk))
    long_reason = alice_qm("hold", str(waiting.pk), "--reason", "x" * 201)

    assert (cancel.code, cancel.err) == (1, f"error: No job {theirs.pk}, or not yours to see.\n")
    assert hold.code == 1 and hold.err.startswith(f"error: Job {running.pk} is running: only a waiting job can be held.")
    assert long_reason.code == 1 and long_reason.err.startswith(f"error: job {waiting.pk}: Invalid request.")
    assert Job.objects.get(pk=theirs.pk).state == JobState.PENDING


def test_a_hold_reason_without_hold_names_the_flags(alice_qm, fleet) -> None:
    """It said the API's words, `send "hold": true with it`, to someone who typed flags."""
    run = alice_qm("submit", "--name", "x", "--gpus", "1", "--hold-reason", "no data yet")

    assert run.code == 2
    assert run.err == ("error: Invalid request.\n  hold_reason (--hold-reason no data yet): a reason is for a job "
                       "submitted held: add --hold (sbatch -H), or leave the reason out\n")
    assert not Job.objects.exists()
    held = alice_qm("submit", "--name", "x", "--gpus", "1", "--hold-reason", "no data yet", "-H")
    assert held.code == 0, held.err
    assert Job.objects.get().hold_reason == "no data yet"


def test_a_bad_sort_or_state_names_the_flag_and_the_choices(alice_qm, fleet) -> None:
    """`qm list --sort age` said "ordering: Select a valid choice. age is not one of the available
    choices.": neither the flag typed nor what it takes. The help listed 7 of the 10 sorts."""
    sort = alice_qm("list", "--sort", "age")
    state = alice_qm("list", "--state", "runing")

    assert sort.code == 1 and sort.err == (
        "error: Invalid request.\n  ordering (--sort age): 'age' is not a field this list sorts by; choose one of: "
        "id, submitted_at, gpus, queue_position, priority, name, state, started_at, finished_at, elapsed "
        "(-FIELD descends).\n")
    assert state.code == 1 and state.err.startswith(
        "error: Invalid request.\n  state (--state runing): 'runing' is not a valid choice; choose one of: pending, "
        "running, ")
    assert "started_at, finished_at or elapsed" in " ".join(alice_qm("list", "--help").out.split())


def test_submit_parsable_prints_the_id_alone_for_a_pipeline(alice_qm, fleet) -> None:
    """sbatch --parsable: JOB=$(qm submit --parsable ...), then -d afterok:$JOB."""
    first = alice_qm("submit", "--name", "prep", "--gpus", "1", "--parsable")
    assert first.code == 0, first.err
    prep = Job.objects.get(name="prep")
    assert first.out == f"{prep.pk}\n"

    then = alice_qm("submit", "--name", "train", "--gpus", "1", "-d", f"afterok:{first.out.strip()}", "--parsable")
    assert then.code == 0, then.err
    train = Job.objects.get(name="train")
    assert then.out == f"{train.pk}\n"
    assert list(train.dependencies.values_list("upstream_id", flat=True)) == [prep.pk]

    sweep = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-2", "--parsable")
    assert sweep.code == 0 and sweep.out == f"{Job.objects.filter(name='sweep').first().array_id}\n"

    both = alice_qm("submit", "--name", "x", "--gpus", "1", "--parsable", "--json")
    assert both.code == 2 and both.err == "error: give --json (the API's answer) or --parsable (the id alone), not both\n"
    assert not Job.objects.filter(name="x").exists()


def test_a_misspelled_reason_names_the_flag_and_the_codes(alice_qm, fleet) -> None:
    """`qm list --reason QuotaExceded` printed "No jobs pending or running": a typo read as an
    empty queue. It is refused naming --reason and the codes it takes, as --state refuses."""
    f.make_job(fleet.ml, name="big", submitter=fleet.users["owner"], pending_code="QuotaExceeded")

    typo = alice_qm("list", "--reason", "QuotaExceded")

    assert typo.code == 1 and typo.out == ""
    assert typo.err == (
        "error: Invalid request.\n  pending_code (--reason QuotaExceded): 'QuotaExceded' is not a valid choice; "
        f"choose one of: {', '.join(WAITING_CODES)}.\n")
    assert _ids(alice_qm("list", "--reason", " QuotaExceeded ").out) == {Job.objects.get(name="big").pk}


def test_an_elastic_job_without_gpus_is_told_gpus_is_its_size_between_min_and_max(alice_qm, fleet) -> None:
    # --min-gpus and --max-gpus read as the whole of an elastic request; "a job needs --gpus"
    # alone did not say what --gpus is to one.
    refused = alice_qm("submit", "--name", "x", "--min-gpus", "2", "--max-gpus", "16")

    assert refused.code == 2
    assert refused.err.strip() == ("error: a job needs --gpus (or `gpus:` in the YAML file); an elastic one too: "
                                   "its preferred size, from --min-gpus 2 to --max-gpus 16")
    assert not Job.objects.exists()
