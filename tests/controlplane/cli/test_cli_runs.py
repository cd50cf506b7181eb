"""`qm runs JOB`: a job's runs, oldest first, as `sacct --duplicates` lists a requeued job's: a
table with when each run was bound, started and ended, how it ended and why, where, GPU-hours,
cost, quota and the work lost, then the stop's notice and the totals; --limit N its latest N;
--json gives the API's list.
Another team's job is refused as `qm status` refuses it (exit 1, the API's words)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.cli import output
from tests.controlplane import factories as f
from tests.controlplane.job_runs_story import NOTICE, preempted_then_succeeded

pytestmark = pytest.mark.slow


@pytest.fixture
def story(fleet: Any) -> Any:
    job = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="train-7b", gpus=2)
    return job, preempted_then_succeeded(job, fleet.nodes[1], fleet.nodes[2], now=timezone.now())


def _time(at: Any) -> str:
    return output.utc_text(at.isoformat(), suffix="")


def test_qm_runs_prints_each_run_with_how_it_ended(alice_qm, story) -> None:
    job, told = story
    t0 = told.t0

    run = alice_qm("runs", str(job.pk))

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert lines[0].split() == ["RUN", "GENERATION", "START", "(UTC)", "AGENTS", "UP", "ENDED", "ELAPSED", "HOW", "IT",
                                "ENDED", "REASON", "EXIT", "GPUS", "WHERE", "GPU-H", "COST", "QUOTA", "LOST", "GPU-H"]
    first = lines[1].split("  ")
    first = [c.strip() for c in first if c.strip()]
    assert first == ["1", str(told.preempted.generation), _time(t0), _time(t0 + timedelta(minutes=1)),
                     _time(t0 + timedelta(minutes=90, seconds=30)), "01:30:30", "Preempted; requeued", "Preempted",
                     "143", "2", "h100-1×2", "3.02", "$7.54", "borrowed", "1.02"]
    second = [c.strip() for c in lines[2].split("  ") if c.strip()]
    assert second == ["2", str(told.succeeded.generation), _time(t0 + timedelta(hours=2)),
                      _time(t0 + timedelta(hours=2, minutes=1)), _time(t0 + timedelta(hours=4)), "02:00:00",
                      "Succeeded (exit code 0)", "Exited", "0", "2", "h100-2×2", "4.00", "$10.00", "own", "-"]
    assert lines[3] == f"run 1: {NOTICE}"
    # At $2.50 a GPU-hour, as showback charges it: 2 × 5,430 s = $7.54, 2 × 2 h = $10.00.
    assert lines[4] == "2 runs, 1 ended in a requeue; 7.02 GPU-hours held, costing $17.54; 1.02 GPU-hours of work lost."
    assert len(lines) == 5


def test_qm_runs_json_is_the_apis_list(alice_qm, story) -> None:
    job, told = story
    run = alice_qm("runs", str(job.pk), "--json")
    assert run.code == 0, run.err
    runs = run.json()
    assert [(r["run"], r["generation"], r["outcome"], r["reason"]) for r in runs] == [
        (1, told.preempted.generation, "requeued", "Preempted"), (2, told.succeeded.generation, "succeeded", "Exited")]
    assert runs[0]["lost_gpu_hours"] == pytest.approx(1.0167, abs=1e-4) and runs[1]["lost_gpu_hours"] is None
    assert [r["cost_usd"] for r in runs] == [7.54, 10.00]


def test_qm_runs_limit_shows_the_latest_runs_and_what_all_of_them_cost(alice_qm, story) -> None:
    job, told = story

    run = alice_qm("runs", str(job.pk), "--limit", "1")

    assert run.code == 0, run.err
    lines = run.out.splitlines()
    assert len(lines) == 4
    assert [c.strip() for c in lines[1].split("  ") if c.strip()][:2] == ["2", str(told.succeeded.generation)]
    assert lines[2] == ("Latest 1 of 2 runs (2–2), 0 ended in a requeue; 4.00 GPU-hours held, costing $10.00; "
                        "0 GPU-hours of work lost.")
    assert lines[3] == f"All 2 runs cost $17.54; `qm runs {job.pk}` lists them all."
    latest = alice_qm("runs", str(job.pk), "--limit", "1", "--json")
    assert [(r["run"], r["generation"]) for r in latest.json()] == [(2, told.succeeded.generation)]
    # More than it has: all of them, as without --limit.
    assert alice_qm("runs", str(job.pk), "--limit", "5").out == alice_qm("runs", str(job.pk)).out


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5"])
def test_qm_runs_refuses_a_limit_that_is_not_a_count_of_runs(alice_qm, story, value) -> None:
    job, _ = story
    run = alice_qm("runs", str(job.pk), "--limit", value)
    assert run.code == 2 and run.out == ""
    assert f"argument --limit: '{value}' is not a whole number of at least 1 (the latest N runs)" in run.err


def test_a_job_that_never_ran_and_another_teams_job(qm, fleet, story) -> None:
    job, _ = story
    waiting = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="waits")
    assert qm("login", "--username", "alice", "--password-stdin", stdin="alice\n").code == 0
    never = qm("runs", str(waiting.pk))
    # Still waiting: not yet run, as the job page's Runs panel says it (it said "never bound").
    assert (never.code, never.out) == (0, f"Job {waiting.pk} has not run yet: it waits (`qm explain {waiting.pk}` "
                                          "says why); each time it is bound to GPUs a run is listed here.\n")
    cancelled = f.make_job(fleet.ml, submitter=fleet.users["owner"], name="gone", state=JobState.CANCELLED)
    gone = qm("runs", str(cancelled.pk))
    assert (gone.code, gone.out) == (0, f"Job {cancelled.pk} never ran: it was cancelled before it was bound to "
                                        "GPUs.\n")
    assert qm("runs", "abc").err == "error: 'abc' is not a job id (a number, as `qm list` shows)\n"

    assert qm("login", "--username", "bob", "--password-stdin", stdin="bob\n").code == 0
    refused = qm("runs", str(job.pk))
    assert refused.code == 1 and refused.out == ""
    assert f"No job {job.pk}, or not yours to see." in refused.err
