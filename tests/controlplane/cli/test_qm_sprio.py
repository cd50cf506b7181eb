"""`qm sprio` (Slurm's sprio): the waiting jobs you may see in queue order, each with its
priority (class value + aging points), its team's dominant share and its runtime limit."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import SchedulerLease
from controlplane.services.cycle import run_cycle
from tests.controlplane import factories as f

pytestmark = pytest.mark.slow

#: The footnote of an ORDER "3 (1)": the job's place among the jobs that can start.
NOTE = ("ORDER N (M): N by priority, M among the jobs that can start (its queue position): jobs ahead of it can never "
        "run as asked and the cycle places them after every job that can start.")


def test_sprio_lists_your_waiting_jobs_in_queue_order_with_their_factors(alice_qm, fleet) -> None:
    now = timezone.now()
    old = f.make_job(fleet.ml, fleet.research, name="old", gpus=8, submitted_at=now - timedelta(hours=3, minutes=1))
    urgent = f.make_job(fleet.ml, fleet.production, name="urgent", gpus=8, submitted_at=now)
    f.make_job(fleet.vision, fleet.research, name="theirs", gpus=8, submitted_at=now - timedelta(hours=5))

    run = alice_qm("sprio")

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].startswith("Queue order (priority_fair_share): higher PRIORITY first")
    assert re.match(r"ORDER\s+ID\s+NAME\s+TEAM\s+CLASS\s+PRIORITY\s+= CLASS\s+\+ AGE\s+SHARE\s+LIMIT$", lines[1])
    value = fleet.research.value
    assert re.match(rf"\s*1\s+{urgent.pk}\s+urgent\s+ml\s+{fleet.production.name}\s+{fleet.production.value}\s+"
                    rf"{fleet.production.value}\s+0\s+0\.000\s+1 h$", lines[2]), run.out
    # vision's older job waited 5 h: +5 points, ahead of ml's 3 h old one (+3), but not listed
    assert re.match(rf"\s*3\s+{old.pk}\s+old\s+ml\s+research\s+{value + 3}\s+{value}\s+3\s+0\.000\s+1 h$", lines[3]), run.out
    assert lines[4] == "3 jobs in line in all; ORDER is the next cycle's."
    assert "theirs" not in run.out


def test_sprio_of_jobs_not_in_line_says_so(alice_qm, fleet) -> None:
    held = f.make_job(fleet.ml, fleet.research, name="held", gpus=8, hold="user")
    run = alice_qm("sprio", str(held.pk))
    assert run.code == 0 and run.out.splitlines()[1] == (
        "None of those jobs is in line (0 jobs in line in all; held jobs and jobs waiting for a dependency are not "
        "in line).")


def test_sprio_refuses_a_job_that_is_not_an_id(alice_qm, fleet) -> None:
    run = alice_qm("sprio", "abc")
    assert run.code != 0 and "'abc' is not a job id" in run.err


def test_explain_says_where_a_job_in_line_stands_and_why(alice_qm, fleet) -> None:
    now = timezone.now()
    f.make_job(fleet.ml, fleet.production, name="urgent", gpus=8, submitted_at=now)
    old = f.make_job(fleet.ml, fleet.research, name="old", gpus=8, submitted_at=now - timedelta(hours=2, minutes=1),
                     pending_code="InsufficientGpus")
    explained = alice_qm("explain", str(old.pk)).out
    assert re.search(rf"^  priority:\s+{fleet.research.value + 2} \(class research {fleet.research.value} \+ 2 for "
                     r"waiting\); team ml's dominant share 0\.000; runtime limit 1 h; 2 of 2 in line for the next cycle \(qm sprio\)$",
                     explained, re.M), explained
    held = f.make_job(fleet.ml, fleet.research, name="held", gpus=8, hold="user", pending_code="Held")
    assert "priority:" not in alice_qm("explain", str(held.pk)).out  # not in line


def test_sprio_of_an_unknown_job_or_anothers_is_an_error_naming_it(alice_qm, fleet) -> None:
    """It printed "None of those jobs is in line" and exited 0 for a job that does not exist (a
    typo) or that is not yours to see, as though it merely waited out of line."""
    theirs = f.make_job(fleet.vision, fleet.research, name="theirs", gpus=8)

    unknown = alice_qm("sprio", "999999")
    hidden = alice_qm("sprio", str(theirs.pk))

    assert (unknown.code, unknown.out, unknown.err) == (1, "", "error: No job 999999, or not yours to see.\n")
    assert (hidden.code, hidden.out, hidden.err) == (1, "", f"error: No job {theirs.pk}, or not yours to see.\n")


def test_sprio_lists_the_jobs_in_line_and_says_what_the_others_are(alice_qm, fleet) -> None:
    waiting = f.make_job(fleet.ml, fleet.research, name="waiting", gpus=8)
    running = f.make_job(fleet.ml, fleet.research, name="running", gpus=8, state=JobState.RUNNING,
                         started_at=timezone.now())
    # a loop that runs: stderr is the error alone (a stalled one is said: test_qm_loop_stalled.py)
    SchedulerLease.objects.update_or_create(name="scheduler", defaults={"last_cycle_at": timezone.now()})

    run = alice_qm("sprio", str(waiting.pk), str(running.pk), "999999")

    assert run.code == 1
    lines = run.out.splitlines()
    assert re.match(rf"\s*1\s+{waiting.pk}\s+waiting\s+ml\s+research\s", lines[2]), run.out
    assert lines[3:] == ["1 job in line in all; ORDER is the next cycle's.",
                         f"Job {running.pk} (running) is running; not in line."]
    assert run.err == "error: No job 999999, or not yours to see.\n"
    assert alice_qm("sprio", str(running.pk), "--json").code == 0


def test_sprio_of_a_held_job_says_it_is_held(alice_qm, fleet) -> None:
    held = f.make_job(fleet.ml, fleet.research, name="held", gpus=8, hold="user")

    run = alice_qm("sprio", str(held.pk))

    assert run.code == 0 and run.out.splitlines()[2] == f"Job {held.pk} (held) is pending (held); not in line."


def test_sprio_shows_the_first_jobs_and_says_how_many_more(alice_qm, fleet) -> None:
    """It printed every job in line (5,012 lines on the scale audit's queue): now the first 50,
    --limit N for the first N, --all for every one, with a line saying how many more wait."""
    now = timezone.now()
    jobs = [f.make_job(fleet.ml, fleet.research, name=f"j{i}", gpus=8, submitted_at=now - timedelta(minutes=10 - i))
            for i in range(3)]
    f.make_job(fleet.vision, fleet.research, name="theirs", gpus=8, submitted_at=now)

    first = alice_qm("sprio", "--limit", "2")
    every = alice_qm("sprio", "--all")
    as_json = alice_qm("sprio", "-n", "1", "--json")

    assert first.code == 0, first.err
    lines = first.out.splitlines()
    assert [line.split()[1] for line in lines[2:4]] == [str(jobs[0].pk), str(jobs[1].pk)]
    assert lines[4:] == ["The first 2 of 3; 1 more (--limit N for the first N, --all for every one).",
                         "4 jobs in line in all; ORDER is the next cycle's."]
    assert [line.split()[1] for line in every.out.splitlines()[2:5]] == [str(j.pk) for j in jobs]
    assert "more" not in every.out
    body = json.loads(as_json.out)
    assert [r["job"] for r in body["jobs"]] == [jobs[0].pk] and body["count"] == 3 and "offset=1" in body["next"]
    assert alice_qm("sprio", "--limit", "0").code != 0
    assert "argument --limit/-n: '0' is not a whole number of at least 1" in alice_qm("sprio", "--limit", "0").err


def test_sprio_of_one_team_and_a_team_not_yours(alice_qm, fleet) -> None:
    mine = f.make_job(fleet.ml, fleet.research, name="mine", gpus=8)

    run = alice_qm("sprio", "--team", fleet.ml.name)
    refused = alice_qm("sprio", "--team", fleet.vision.name)

    assert run.code == 0 and re.match(rf"\s*1\s+{mine.pk}\s+mine\s", run.out.splitlines()[2]), run.out
    assert refused.code == 1
    assert f"team (--team {fleet.vision.name}): no team named '{fleet.vision.name}' whose jobs you may read" \
        in refused.err, refused.err


def test_sprio_names_an_array_task_with_its_index_as_qm_list_does(alice_qm, fleet) -> None:
    task = f.make_job(fleet.ml, fleet.research, name="sweep", gpus=8, array_id=uuid.uuid4(), array_index=3)

    sprio, listed = alice_qm("sprio"), alice_qm("list")

    assert re.search(rf"^\s*1\s+{task.pk}\s+sweep \[3\]\s+ml\s", sprio.out, re.M), sprio.out
    assert re.search(rf"^\s*{task.pk}\s+sweep \[3\]\s+ml\s", listed.out, re.M), listed.out


def test_sprio_marks_a_job_that_can_never_run_as_ranked_by_priority_alone(alice_qm, fleet) -> None:
    """A job that can never run as asked is in the order at its priority's rank, but the cycle
    places it after every job that can start: sprio listed it first with nothing saying so. Its
    ORDER is marked `*` and a footnote says its rank in the words of its page and `qm explain`
    (services/queue_rank_text.rank_in_line); `jobs/priority/` tells it by `can_run`."""
    now = timezone.now()
    never = f.make_job(fleet.ml, fleet.production, name="never", gpus=8, submitted_at=now, queue_position=2,
                       pending_code="CanNeverRun", pending_resolvable=False,
                       pending_message="As asked it can never run.")
    fits = f.make_job(fleet.ml, fleet.research, name="fits", gpus=8, submitted_at=now - timedelta(minutes=5),
                      pending_code="InsufficientGpus", queue_position=1)

    run = alice_qm("sprio")
    body = json.loads(alice_qm("sprio", "--json").out)

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert re.match(rf"1\*\s+{never.pk}\s+never\s", lines[2]), run.out
    assert re.match(rf"2 \(1\)\s+{fits.pk}\s+fits\s", lines[3]), run.out  # 1 among those that can start
    assert lines[4] == (f"* Job {never.pk}: 1 of 2 by priority alone, but as asked it can never run, so the cycle "
                        "places it after every job that can start (its queue position). As asked it can never run.")
    assert lines[5:] == [NOTE, "2 jobs in line in all; ORDER is the next cycle's."]
    assert [(r["job"], r["can_run"]) for r in body["jobs"]] == [(never.pk, False), (fits.pk, True)]
    # a queue of jobs that can all run keeps its plain ORDER and no footnote
    fits_only = alice_qm("sprio", str(fits.pk)).out
    assert "*" not in fits_only and "by priority alone" not in fits_only, fits_only


def test_sprio_says_an_arrays_never_runnable_tasks_once_not_a_line_each(alice_qm, fleet) -> None:
    """An array whose 50 tasks can never run as asked had a footnote of 50 lines, one a task. Now
    one line names the array, how many of its tasks, which (indices, job ids), their ranks by
    priority alone and why; a plain job keeps its own line. `--json` is the API's answer, as it
    was: a row per task, each with `can_run` false."""
    now = timezone.now()
    never = f.make_job(fleet.ml, fleet.production, name="never", gpus=8, submitted_at=now, queue_position=1,
                       pending_code="CanNeverRun", pending_resolvable=False)
    array = uuid.uuid4()
    tasks = [f.make_job(fleet.ml, fleet.research, name="sweep", gpus=64, submitted_at=now - timedelta(minutes=5),
                        array_id=array, array_index=3 + i, pending_code="CanNeverRun", pending_resolvable=False,
                        queue_position=2 + i)
             for i in range(50)]
    fits = f.make_job(fleet.ml, fleet.research, name="fits", gpus=8, submitted_at=now, queue_position=52,
                      pending_code="InsufficientGpus")

    run = alice_qm("sprio", "--all")
    body = json.loads(alice_qm("sprio", "--all", "--json").out)

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert len(lines) == 2 + 52 + 4, run.out
    assert re.match(rf"1\*\s+{never.pk}\s+never\s", lines[2]), run.out
    assert re.match(rf"2\*\s+{tasks[0].pk}\s+sweep \[3\]\s", lines[3]), run.out
    assert re.match(rf"52 \(1\)\s+{fits.pk}\s+fits\s", lines[53]), run.out
    assert lines[54:] == [
        f"* Job {never.pk}: 1 of 52 by priority alone, but as asked it can never run, so the cycle places it after "
        "every job that can start (its queue position).",
        f"* Tasks 3–52 of array sweep (50 tasks, jobs {tasks[0].pk}–{tasks[-1].pk}): 2–51 of 52 by priority alone, "
        "but as asked they can never run, so the cycle places them after every job that can start (their queue "
        "positions).",
        NOTE,
        "52 jobs in line in all; ORDER is the next cycle's.",
    ]
    assert [(r["job"], r["array_id"], r["array_index"], r["order"], r["can_run"]) for r in body["jobs"]] == [
        (never.pk, None, None, 1, False),
        *[(t.pk, str(array), 3 + i, 2 + i, False) for i, t in enumerate(tasks)],
        (fits.pk, None, None, 52, True)]


def test_sprio_says_why_a_job_can_never_run_and_groups_an_arrays_tasks_by_reason(alice_qm, fleet) -> None:
    """The footnote said a job can never run as asked, not why: `jobs/priority/` did not carry the
    reason. It now says the engine's sentence as the last cycle stored it (`qm explain`'s), a line
    per job, and a line per array and reason: an array whose tasks can never run for two reasons
    has two lines, each naming its own tasks. `--json` gives each row's `reason_code` and `reason`."""
    now = timezone.now()
    wide = f.make_job(fleet.ml, fleet.production, name="wide", gpus=16, topology="same_node", submitted_at=now)
    array = uuid.uuid4()
    tasks = [f.make_job(fleet.ml, fleet.research, name="sweep", gpus=16, topology="same_node", array_id=array,
                        array_index=3 + i, submitted_at=now - timedelta(minutes=5)) for i in range(6)]
    tasks += [f.make_job(fleet.ml, fleet.research, name="sweep", gpus=8, gpu_types=["B200"], array_id=array,
                         array_index=9 + i, submitted_at=now - timedelta(minutes=5)) for i in range(2)]
    run_cycle("test")  # the engine's reasons, stored as every cycle stores them
    fits = f.make_job(fleet.ml, fleet.research, name="fits", gpus=8, submitted_at=now, pending_code="InsufficientGpus")

    run = alice_qm("sprio")
    body = json.loads(alice_qm("sprio", "--json").out)

    assert run.code == 0, run.err
    too_big = "Can never run on this fleet: it needs 16 GPUs on one node; the largest capable node has 8."
    no_b200 = "Can never run on this fleet: it needs GPUs of type B200; the fleet has A100-40GB (40 GB), H100-80GB (80 GB)."
    assert run.out.splitlines()[-5:] == [
        f"* Job {wide.pk}: 1 of 10 by priority alone, but as asked it can never run, so the cycle places it after "
        f"every job that can start (its queue position). {too_big}",
        f"* Tasks 3–8 of array sweep (6 tasks, jobs {tasks[0].pk}–{tasks[5].pk}): 2–7 of 10 by priority alone, but "
        "as asked they can never run, so the cycle places them after every job that can start (their queue "
        f"positions). {too_big}",
        f"* Tasks 9–10 of array sweep (2 tasks, jobs {tasks[6].pk}–{tasks[7].pk}): 8–9 of 10 by priority alone, but "
        "as asked they can never run, so the cycle places them after every job that can start (their queue "
        f"positions). {no_b200}",
        NOTE,
        "10 jobs in line in all; ORDER is the next cycle's.",
    ], run.out
    assert [(r["job"], r["can_run"], r["reason_code"], r["reason"]) for r in body["jobs"]] == [
        (wide.pk, False, "CanNeverRun", too_big),
        *[(t.pk, False, "CanNeverRun", too_big) for t in tasks[:6]],
        *[(t.pk, False, "CanNeverRun", no_b200) for t in tasks[6:]],
        (fits.pk, True, None, None)]


def test_sprio_says_a_jobs_place_among_those_that_can_start_behind_jobs_that_never_can(alice_qm, fleet) -> None:
    """A job that can start, ranked by priority behind jobs that can never run as asked, is placed
    before them by the cycle: its page and `qm explain` say its place among the jobs that can
    start (its queue position), but sprio's ORDER said its rank alone with no mark (the researcher
    audit, 7 Dec). Its ORDER says both, "3 (1)", and a footnote says what the second is, in the
    page's words (services/queue_rank_text.py), from `jobs/priority/`'s `never_ahead`."""
    now = timezone.now()
    nevers = [f.make_job(fleet.ml, fleet.production, name=f"never{i}", gpus=8, submitted_at=now, queue_position=2 + i,
                         pending_code="CanNeverRun", pending_resolvable=False) for i in range(2)]
    fits = f.make_job(fleet.ml, fleet.research, name="fits", gpus=8, submitted_at=now - timedelta(minutes=5),
                      pending_code="InsufficientGpus", queue_position=1)

    run = alice_qm("sprio")
    explained = alice_qm("explain", str(fits.pk)).out

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert re.match(rf"1\*\s+{nevers[0].pk}\s+never0\s", lines[2]), run.out
    assert re.match(rf"3 \(1\)\s+{fits.pk}\s+fits\s", lines[4]), run.out
    assert lines[7] == NOTE, run.out
    # the same place its page and `qm explain` say
    assert "3 of 3 by priority, 1 among the jobs that can start (its queue position)" in explained, explained
    # listed alone, the jobs ahead are not shown: its ORDER still says its place, and the footnote what it is
    alone = alice_qm("sprio", str(fits.pk)).out.splitlines()
    assert re.match(rf"3 \(1\)\s+{fits.pk}\s+fits\s", alone[2]), alone
    assert alone[3].startswith("ORDER N (M): "), alone
