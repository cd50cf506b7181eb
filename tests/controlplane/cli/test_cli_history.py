"""`qm history` (alias `qm sacct`): the jobs that ended in a window, as sacct lists them, with
their exit codes, elapsed times, GPU-hours (the accounting's) and lost GPU-hours, and a totals
line; csv and json for finance's scripts; human times for --since/--until, bad ones refused
naming the option. Before, no `qm` command answered "what did my jobs do yesterday".

The fixture builds yesterday's work from the test's clock; `qm` reads its own clock, which may
be past the next midnight by then. So the tests about the figures ask for the fixture's day by
date, and those about the words (`yesterday`, `today`, the default since 00:00 UTC today) read
the window `qm` used (its JSON's since and until) and expect the fixture's jobs that ended in
it: the same answer on either side of midnight, never a failure because one fell mid-test."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.choices import AllocationState, JobState
from controlplane.cli import output
from controlplane.models import Allocation, AllocationGpu, Job, Node
from controlplane.services import accounting, job_costs, job_history
from tests.controlplane import factories as f
from tests.controlplane.cli.conftest import REPO

pytestmark = pytest.mark.slow
_generation = iter(range(1, 10_000))


def _held(job: Job, node: Node, start: datetime, end: datetime, gpus: int) -> None:
    allocation = Allocation.objects.create(job=job, generation=next(_generation), epoch=1, created_at=start,
                                           started_at=start, released_at=end, state=AllocationState.RELEASED)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=node, gpu_index=i, live=False)
                                      for i in range(gpus))


@pytest.fixture
def yesterday(fleet: Any) -> dict[str, Any]:
    """Yesterday's work of team ml: a job preempted off h100-1 and finished on h100-2 (8 GPUs for
    1 h, then 4 GPUs for 1 h: 12 GPU-hours, 2 of them lost), one that failed with exit code 137
    after 30 min on 2 GPUs (1 GPU-hour), and one cancelled while it waited. Also a job that ended
    today and one of team vision, which alice's history must not show; the accounting rolled up."""
    now = timezone.now().astimezone(UTC)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0) - timedelta(days=1)
    alice = fleet.users["owner"]
    t1 = day + timedelta(hours=9)
    moved = f.make_job(fleet.ml, name="train-7b", gpus=8, min_gpus=4, max_gpus=8, submitter=alice,
                       state=JobState.SUCCEEDED, exit_code=0, started_at=t1 + timedelta(hours=1, minutes=10),
                       finished_at=t1 + timedelta(hours=2, minutes=10), preemption_count=1, requeue_count=1,
                       lost_gpu_seconds=2 * 3600.0, submitted_at=t1)
    _held(moved, fleet.nodes[1], t1, t1 + timedelta(hours=1), 8)
    _held(moved, fleet.nodes[2], t1 + timedelta(hours=1, minutes=10), t1 + timedelta(hours=2, minutes=10), 4)
    t2 = day + timedelta(hours=14)
    oom = f.make_job(fleet.ml, name="eval-oom", gpus=2, submitter=alice, state=JobState.FAILED, exit_code=137,
                     started_at=t2, finished_at=t2 + timedelta(minutes=30), submitted_at=t2)
    _held(oom, fleet.nodes[3], t2, t2 + timedelta(minutes=30), 2)
    waited = f.make_job(fleet.ml, name="never-ran", submitter=alice, state=JobState.CANCELLED,
                        finished_at=day + timedelta(hours=20), submitted_at=day + timedelta(hours=19))
    # Ended today and before now, even a minute past midnight UTC (it ended at 00:02 and was not
    # ended yet when the suite ran at 00:00: history since yesterday counted 3 jobs, not 4).
    ended = day + timedelta(days=1) + min(timedelta(minutes=2), (now - day - timedelta(days=1)) / 2)
    today = f.make_job(fleet.ml, name="today", submitter=alice, state=JobState.SUCCEEDED, exit_code=0,
                       started_at=ended - (ended - day - timedelta(days=1)) / 2, finished_at=ended)
    f.make_job(fleet.vision, name="bobs", state=JobState.SUCCEEDED, started_at=t2, finished_at=t2 + timedelta(hours=1))
    accounting.catch_up(day + timedelta(days=1))
    return {"day": day, "moved": moved, "oom": oom, "waited": waited, "today": today}


def _dates(day: datetime, *, until: bool = True) -> list[str]:
    """`--since DAY [--until DAY+1]`: the fixture's day by date, whatever `qm`'s clock says."""
    return ["--since", f"{day:%Y-%m-%d}"] + (["--until", f"{day + timedelta(days=1):%Y-%m-%d}"] if until else [])


def _window(run: Any) -> tuple[datetime, datetime]:
    """The [since, until) window a `qm history --format json` run used."""
    return datetime.fromisoformat(run.json()["since"]), datetime.fromisoformat(run.json()["until"])


def _ended_in(yesterday: dict[str, Any], since: datetime, until: datetime) -> list[str]:
    """Alice's fixture jobs that ended in [since, until), oldest end first."""
    jobs = sorted((yesterday[key] for key in ("moved", "oom", "waited", "today")), key=lambda job: job.finished_at)
    return [job.name for job in jobs if since <= job.finished_at < until]


def _midnight(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


def _rows(out: str) -> dict[str, list[str]]:
    """The table's rows by job name (columns split on runs of two or more spaces)."""
    lines = out.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "TEAM", "USER", "STATE", "EXIT", "START", "(UTC)", "ELAPSED", "GPUS",
                                "GPU-H", "LOST-GPU-H", "COST", "$", "NODES"], out
    rows = [re.split(r"\s{2,}", line.strip()) for line in lines[1:] if re.match(r"^\s*\d+\s{2,}", line)]
    return {row[1]: row for row in rows}


def test_history_of_yesterday_lists_what_ended_with_its_figures_and_totals(alice_qm, yesterday) -> None:
    day = yesterday["day"]
    run = alice_qm("history", *_dates(day))

    assert run.code == 0, run.err
    rows = _rows(run.out)
    assert list(rows) == ["train-7b", "eval-oom", "never-ran"]  # oldest end first; not today's, not bob's
    start = (day + timedelta(hours=10, minutes=10)).strftime("%Y-%m-%d %H:%M:%S")
    assert rows["train-7b"] == [str(yesterday["moved"].pk), "train-7b", "ml", "alice", "succeeded", "0", start,
                                "01:00:00", "4 (asked 8)", "12.00", "2.00", "30.00", "h100-1,h100-2"]
    # its last run (the hour ELAPSED says) held 4 of the 8 it asked: 8 GPUs × 1 h + 4 × 1 h = 12 GPU-hours
    assert rows["eval-oom"][4:] == ["failed", "137", rows["eval-oom"][6], "00:30:00", "2", "1.00", "0", "2.50",
                                    "h100-3"]
    assert rows["never-ran"][4:] == ["cancelled", "-", "-", "-", "-", "0", "0", "0.00", "-"]  # held no GPU
    totals = run.out.strip().splitlines()[-1]
    assert totals.startswith(f"3 jobs ended {day:%Y-%m-%d} 00:00:00 → {day + timedelta(days=1):%Y-%m-%d} 00:00:00 UTC: ")
    assert "1 cancelled, 1 failed, 1 succeeded; 13.00 GPU-hours held, 2.00 GPU-hours of work lost" in totals
    assert totals.endswith("; cost $32.50.")


def test_history_since_yesterday_until_today_are_the_utc_days_of_the_moment_qm_asks(alice_qm, yesterday) -> None:
    before = datetime.now(UTC)
    run = alice_qm("history", "--since", "yesterday", "--until", "today", "--format", "json")
    after = datetime.now(UTC)

    assert run.code == 0, run.err
    since, until = _window(run)
    assert until in (_midnight(before), _midnight(after)) and since == until - timedelta(days=1)
    assert [job["name"] for job in run.json()["jobs"]] == _ended_in(yesterday, since, until)
    if since == yesterday["day"]:  # no midnight since the fixture was built: its day, all but today's job
        assert _ended_in(yesterday, since, until) == ["train-7b", "eval-oom", "never-ran"]


def test_history_gpu_hours_are_the_accountings(alice_qm, yesterday) -> None:
    run = alice_qm("history", *_dates(yesterday["day"], until=False), "--format", "json")
    jobs = {j["name"]: j for j in run.json()["jobs"]}
    cost = job_costs.job_cost(yesterday["moved"].pk)
    assert jobs["train-7b"]["gpu_hours"] == float(cost["gpu_hours_allocated"]) == 12.0
    assert run.json()["totals"] == {"jobs": 4, "states": {"succeeded": 2, "cancelled": 1, "failed": 1},
                                    "gpu_hours": 13.0, "lost_gpu_hours": 2.0, "cost_usd": "32.50"}


def test_status_says_elapsed_time_and_gpu_hours_as_history_does(alice_qm, yesterday) -> None:
    job = yesterday["moved"]
    status = alice_qm("status", str(job.pk))
    assert status.code == 0, status.err
    history = {j["name"]: j for j in alice_qm("history", *_dates(yesterday["day"]), "--format", "json").json()["jobs"]}
    lines = {key.rstrip(":"): value for key, value in (line.split(None, 1) for line in status.out.splitlines()
                                                       if line.startswith(("elapsed:", "gpu-hours:")))}
    assert lines["gpu-hours"].strip() == "12.00 held over all its runs (the accounting's)"
    assert lines["elapsed"].strip() == output.clock(history["train-7b"]["elapsed_s"])


def test_history_filters_by_state_node_name_and_exit_code(alice_qm, yesterday) -> None:
    def names(*args: str) -> list[str]:
        run = alice_qm("sacct", *_dates(yesterday["day"]), *args)
        assert run.code == 0, run.err
        return list(_rows(run.out)) if "JOBID" in run.out else []

    assert names("--state", "failed", "--state", "timed_out") == ["eval-oom"]
    assert names("--node", "h100-1") == ["train-7b"]  # preempted off it, finished elsewhere: it ran there
    assert names("--name", "oom") == ["eval-oom"]
    assert names("--exit-code", "0") == ["train-7b"]
    bob = alice_qm("sacct", *_dates(yesterday["day"]), "--user", "bob")  # another team's: as if none
    assert bob.code == 1 and "user (--user bob): no user named 'bob' whose jobs you may read" in bob.err


def _api_csv(user: Any, params: dict[str, Any], path: str = "/api/v1/jobs/history.csv") -> bytes:
    """The server's history CSV for `params`, as a token (the API) or a session (the page) reads it."""
    client = Client()
    if path.startswith("/api/"):
        response = client.get(path, params, HTTP_AUTHORIZATION=f"Token {f.token_for(user)}")
    else:
        client.force_login(user)
        response = client.get(path, params)
    assert response.status_code == 200, response.content if not response.streaming else path
    return b"".join(response.streaming_content)


def _qm_bytes(qm: Any, *args: str) -> bytes:
    """`qm`'s standard output as bytes, as a pipe or a file receives them."""
    done = subprocess.run([sys.executable, "-m", "controlplane.cli.main", *args], capture_output=True,
                          env=qm.env, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout


def test_history_csv_is_the_servers_byte_for_byte_for_the_same_filters(alice_qm, yesterday, fleet) -> None:
    day = yesterday["day"]
    odd = f.make_job(fleet.ml, name="=SUM(A1) évaluation, \"quoted\"", submitter=fleet.users["owner"],
                     state=JobState.SUCCEEDED, exit_code=0, started_at=day + timedelta(hours=21),
                     finished_at=day + timedelta(hours=22), submitted_at=day + timedelta(hours=21))
    window = ["--since", f"{day:%Y-%m-%d}", "--until", f"{day + timedelta(days=1):%Y-%m-%d}"]
    same = {"finished_after": day.isoformat(), "finished_before": (day + timedelta(days=1)).isoformat()}
    alice = fleet.users["owner"]
    f.make_user("carol", team=fleet.ml)
    for flags, params in [
        ([], {}), (["--state", "failed", "--state", "timed_out"], {"state": ["failed", "timed_out"]}),
        (["--node", "h100-1"], {"ran_on": "h100-1"}), (["--name", "oom"], {"name": "oom"}),
        (["--exit-code", "0"], {"exit_code": "0"}), (["--user", "alice"], {"user": "alice"}),
        (["--team", "ml"], {"team": "ml"}), (["--user", "carol"], {"user": "carol"}),  # a teammate without jobs
    ]:
        cli = _qm_bytes(alice_qm, "history", *window, *flags, "--format", "csv")
        assert cli == _api_csv(alice, {**same, **params}), flags
        assert cli == _api_csv(alice, {**same, **params}, path="/history.csv"), flags  # the page's Download CSV
    rows = list(csv.reader(io.StringIO(_qm_bytes(alice_qm, "sacct", *window, "--format", "csv").decode())))
    assert rows[0] == job_history.CSV_COLUMNS
    # newest end first, as the page; not today's job, not bob's
    assert [r[1] for r in rows[1:-1]] == ["'" + odd.name, "never-ran", "eval-oom", "train-7b"]
    moved = rows[-2]
    assert moved[job_history.CSV_COLUMNS.index("gpu_hours")] == "12.0000"
    assert moved[job_history.CSV_COLUMNS.index("lost_gpu_hours")] == "2.0000"
    assert moved[job_history.CSV_COLUMNS.index("ran_on")] == "h100-1 h100-2"  # every node
    assert rows[-1][:2] == ["TOTAL", "4 jobs"] and rows[-1][14:16] == ["13.0000", "2.0000"]


def test_history_csv_refused_by_the_server_says_why_and_writes_nothing(qm, yesterday) -> None:
    run = qm("history", "--since", "yesterday", "--format", "csv")  # never logged in
    assert run.code != 0 and run.out == "", run.out
    assert "qm login" in run.err and "Traceback" not in run.err, run.err


def test_history_defaults_to_since_midnight_utc_today(alice_qm, yesterday) -> None:
    before = datetime.now(UTC)
    run = alice_qm("history", "--format", "json")
    after = datetime.now(UTC)

    assert run.code == 0, run.err
    since, until = _window(run)
    assert before <= until <= after and since == _midnight(until)  # 00:00 UTC of qm's today, to now
    assert [job["name"] for job in run.json()["jobs"]] == _ended_in(yesterday, since, until)
    if since == yesterday["day"] + timedelta(days=1):  # the fixture's today: only the job that ended today
        assert _ended_in(yesterday, since, until) == ["today"]


def test_history_pages_through_more_jobs_than_one_request_gives(alice_qm, fleet) -> None:
    at = timezone.now() - timedelta(hours=1)
    Job.objects.bulk_create(Job(team=fleet.ml, priority_class=fleet.research, name=f"sweep-{i}", gpus=1,
                                runtime_limit_s=3600, state=JobState.SUCCEEDED, submitted_at=at, state_changed_at=at,
                                started_at=at, finished_at=at + timedelta(seconds=i % 600)) for i in range(1203))
    run = alice_qm("history", "--since", "2h", "--format", "json")
    assert run.code == 0, run.err
    assert run.json()["totals"]["jobs"] == 1203 and len({j["id"] for j in run.json()["jobs"]}) == 1203


@pytest.mark.parametrize("args,option", [
    (["--since", "tomorrow"], "--since"), (["--since", "2026-13-01"], "--since"), (["--until", "soon"], "--until"),
    (["--since", "1h", "--until", "2h"], "--until"), (["--since", "2099-01-01"], "--since"),
])
def test_a_time_that_is_no_time_is_refused_naming_the_option(alice_qm, args, option) -> None:
    run = alice_qm("history", *args)
    assert run.code == 2 and run.out == ""
    assert run.err.startswith(f"error: {option}"), run.err
    assert "Traceback" not in run.err


def test_history_says_when_nothing_ended(alice_qm, fleet) -> None:
    run = alice_qm("history", "--since", "2026-11-01", "--until", "2026-11-02")
    assert run.code == 0 and "No job ended 2026-11-01 00:00:00 → 2026-11-02 00:00:00 UTC" in run.out, run.out


def test_history_with_filters_that_match_nothing_names_them_and_does_not_say_nothing_ended(alice_qm, yesterday) -> None:
    """`qm history --state timed_out` on a day when three of alice's jobs ended said "No job ended
    <that day>": false, and read as an empty day (found walking through the demo, 5 Dec, where
    `qm history --since yesterday --state failed` said so after 240 jobs had succeeded)."""
    day = yesterday["day"]
    window = f"{day:%Y-%m-%d} 00:00:00 → {day + timedelta(days=1):%Y-%m-%d} 00:00:00 UTC"

    run = alice_qm("history", *_dates(day), "--state", "timed_out")
    assert run.code == 0 and run.out.startswith(f"No job matching --state timed_out ended {window}."), run.out

    run = alice_qm("history", *_dates(day), "--state", "failed", "--state", "timed_out", "--exit-code", "3",
                   "--name", "eval")
    assert run.code == 0, run.err
    assert run.out.startswith(
        f"No job matching --state failed,timed_out --name eval --exit-code 3 ended {window}."), run.out
    assert "No job ended" not in run.out
