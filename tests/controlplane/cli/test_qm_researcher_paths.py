"""`qm` as a researcher uses it from a terminal, against a live server: what QA found wrong.

- `qm cancel 11 1x 12` cancelled job 11, then stopped at the typo: 12 was left running, and the
  one error line did not say 11 had been cancelled.
- `qm cancel 11 12 --json` printed two JSON documents one after the other: not JSON.
- `qm list --mine` with `$QM_TOKEN` (a CI job's token) filtered on the name stored by the last
  `qm login`, someone else's, and listed nothing.
- `qm status ²` (any digit that is not 0-9) ended in a Python traceback.
- `qm status` of a stopping job said `state: preempting` and nothing more, even for a job its
  owner had just cancelled; `qm explain` knew why.
- a refused submit printed every problem twice (the API's sentence, then the same per field).
- `qm list --limit 2000` said "use --limit to see more": the API gives at most 1,000 a page and
  the CLI had no way to the next one.
- `qm showback --by job` listed job 100 between 10 and 11.
- no way to see a job's history (preempted by whom, requeued, cancelled) or to watch it.
"""

from __future__ import annotations

import json
import queue
import re
import shlex
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from controlplane.models import Allocation, AllocationGpu, Job, SchedulerLease
from controlplane.services import accounting
from controlplane.services.transitions import RELEASE_PREEMPTED, cancel_job, signal_stop
from tests.controlplane import factories as f
from tests.controlplane.accounting.builders import hold, running_job
from tests.controlplane.cli.conftest import REPO
from tests.controlplane.stopping_jobs import make_stopping_jobs

pytestmark = pytest.mark.slow


def test_cancel_with_a_bad_id_among_them_cancels_none(alice_qm, fleet) -> None:
    first, last = f.make_job(fleet.ml), f.make_job(fleet.ml)

    r = alice_qm("cancel", str(first.pk), "1x", str(last.pk))

    assert r.code == 2 and "'1x' is not a job id" in r.err
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.PENDING}


def test_cancel_json_of_several_jobs_is_one_json_list(alice_qm, fleet) -> None:
    a, b = f.make_job(fleet.ml), f.make_job(fleet.ml)

    r = alice_qm("cancel", str(a.pk), str(b.pk), "--json")

    assert r.code == 0, r.err
    assert [answer["job"]["id"] for answer in r.json()] == [a.pk, b.pk]
    assert {answer["job"]["state"] for answer in r.json()} == {JobState.CANCELLED}
    one = alice_qm("cancel", str(f.make_job(fleet.ml).pk), "--json")
    assert one.code == 0 and one.json()["job"]["state"] == JobState.CANCELLED  # one job: the API's answer


def test_cancel_json_with_a_refusal_is_still_one_document_and_exit_1(alice_qm, fleet) -> None:
    # A job already stopping at its runtime limit passes qm's first read (a stopping job may be
    # cancellable) and is refused by its cancel; an ended one would have cancelled nothing.
    stopping = make_stopping_jobs(fleet)["timed-out"]
    live = f.make_job(fleet.ml)

    r = alice_qm("cancel", str(live.pk), str(stopping.pk), "--json")

    assert r.code == 1 and f"job {stopping.pk}" in r.err.lower()  # "error: Job N is already stopping …"
    assert [answer["job"]["id"] for answer in r.json()] == [live.pk]


def test_list_mine_with_qm_token_lists_the_tokens_owner_jobs(alice_qm, fleet) -> None:
    """Logged in as alice; $QM_TOKEN is bob's (team vision): --mine is bob's jobs."""
    f.make_job(fleet.vision, name="bobs", submitter=fleet.users["other_team"])
    f.make_job(fleet.ml, name="alices", submitter=fleet.users["owner"])

    bob = alice_qm("list", "--mine", extra_env={"QM_TOKEN": f.token_for(fleet.users["other_team"])})
    alice = alice_qm("list", "--mine")

    assert bob.code == 0 and "bobs" in bob.out, bob.out + bob.err
    assert alice.code == 0 and "alices" in alice.out and "bobs" not in alice.out


@pytest.mark.parametrize("text", ["²", "١٢", "-3", "4.0"])
def test_a_job_id_that_is_not_ascii_digits_is_a_sentence(alice_qm, text) -> None:
    for command in ("status", "explain", "events", "cancel"):
        r = alice_qm(command, text)
        assert r.code == 2 and f"'{text}' is not a job id" in r.err and "Traceback" not in r.err, (command, r.err)


def test_status_of_a_stopping_job_says_why_and_by_when(alice_qm, fleet) -> None:
    SchedulerLease.objects.create(epoch=1)
    started = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    preempted = f.make_job(fleet.ml, gpus=2, state=JobState.RUNNING, started_at=started)
    allocation = Allocation.objects.create(job=preempted, generation=7, epoch=1, created_at=started, started_at=started)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=fleet.nodes[1], gpu_index=i)
                                      for i in range(2))
    notice = "Preempted: higher-priority job 99 (production, 1000) needs its 2 H100-80GB GPUs"
    assert signal_stop(allocation.pk, allocation.generation, reason=RELEASE_PREEMPTED, grace_period_s=30,
                       at=timezone.now(), actor="scheduler", message=notice)
    cancelled = f.make_job(fleet.ml, gpus=2, state=JobState.RUNNING, started_at=started)
    allocation = Allocation.objects.create(job=cancelled, generation=8, epoch=1, created_at=started, started_at=started)
    AllocationGpu.objects.bulk_create(AllocationGpu(allocation=allocation, node=fleet.nodes[2], gpu_index=i)
                                      for i in range(2))
    assert cancel_job(Job.objects.get(pk=cancelled.pk), "user:alice")

    out = {job: alice_qm("status", str(job.pk)) for job in (preempted, cancelled)}

    assert re.search(r"^state:\s+preempting$", out[preempted].out, re.M)
    assert re.search(rf"^stopping:\s+Stopping since .*: {re.escape(notice)}\. Its processes must exit by ",
                     out[preempted].out, re.M), out[preempted].out
    assert re.search(r"^stopping:\s+Stopping since .*Cancelled by alice", out[cancelled].out, re.M)
    running = f.make_job(fleet.ml, state=JobState.RUNNING, started_at=started)
    assert re.search(r"^stopping:\s+-$", alice_qm("status", str(running.pk)).out, re.M)


def test_a_refused_submit_names_each_field_once(alice_qm) -> None:
    r = alice_qm("submit", "--name", "x", "--gpus", "4", "--min-gpus", "8", "--max-gpus", "2")

    assert r.code == 1
    assert r.err.count("min_gpus 8 is more than gpus 4") == 1 and r.err.count("max_gpus 2 is less than gpus 4") == 1
    assert r.err.splitlines() == ["error: Invalid request.", "  min_gpus (--min-gpus 8): min_gpus 8 is more than gpus 4",
                                  "  max_gpus (--max-gpus 2): max_gpus 2 is less than gpus 4"]


def test_list_pages_with_offset_and_says_how_to_reach_the_next(alice_qm, fleet) -> None:
    jobs = [f.make_job(fleet.ml, name=f"j{i}") for i in range(5)]

    first = alice_qm("list", "--limit", "2")
    second = alice_qm("list", "--limit", "2", "--offset", "2")
    last = alice_qm("list", "--limit", "2", "--offset", "4")

    def ids(out: str) -> list[int]:
        return [int(line.split()[0]) for line in out.splitlines()[1:] if line.split() and line.split()[0].isdigit()]

    newest_first = [job.pk for job in reversed(jobs)]
    assert ids(first.out) == newest_first[:2] and "(1–2 of 5; --offset 2 for the next)" in first.out
    assert ids(second.out) == newest_first[2:4] and "(3–4 of 5; --offset 4 for the next)" in second.out
    assert ids(last.out) == newest_first[4:] and "(5–5 of 5)" in last.out
    assert "(" not in alice_qm("list").out.splitlines()[-1]  # everything on one page: no footer


def test_showback_by_job_lists_jobs_in_numeric_order(qm, fleet) -> None:
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=2)
    for pk, node in ((100, fleet.nodes[1]), (9, fleet.nodes[2]), (10, fleet.nodes[3])):
        job = running_job(fleet.ml, gpus=1, started_at=start, id=pk)
        hold(job, [(node, 1)], start, start + timedelta(minutes=30))
    accounting.catch_up(now)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "job", "--window", "1d")

    assert r.code == 0, r.err
    rows = [line.split()[0] for line in r.out.splitlines()[2:]]
    assert rows[:3] == ["9", "10", "100"], r.out


def test_events_prints_a_jobs_history_oldest_first(alice_qm, fleet) -> None:
    r = alice_qm("submit", "--name", "hist", "--gpus", "1")
    job = Job.objects.get(name="hist")
    cancel_job(job, "user:alice")

    table = alice_qm("events", str(job.pk))
    as_json = alice_qm("events", str(job.pk), "--json")

    assert r.code == 0 and table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].split() == ["TIME", "(UTC)", "EVENT", "BY", "WHAT"]
    assert "job.submitted" in lines[1] and "user:alice" in lines[1] and "job.cancelled" in lines[2]
    assert [e["kind"] for e in as_json.json()] == ["job.submitted", "job.cancelled", "job.finished"]
    other = alice_qm("events", str(f.make_job(fleet.vision).pk))
    assert other.code == 1 and "or not yours to see" in other.err


def test_events_follow_prints_new_events_until_the_job_ends(alice_qm, fleet) -> None:
    assert alice_qm("submit", "--name", "watched", "--gpus", "1").code == 0
    job = Job.objects.get(name="watched")
    watcher = subprocess.Popen(
        [sys.executable, "-m", "controlplane.cli.main", "events", str(job.pk), "--follow", "--interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=alice_qm.env, cwd=REPO,
    )
    assert watcher.stdout is not None and watcher.stderr is not None
    lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def read() -> None:
        for line in watcher.stdout:  # type: ignore[union-attr]
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    printed: list[str] = []
    try:
        # Cancelled only once it has printed the submit and is polling (a 2-s sleep here let a
        # slow start on a loaded machine find all three events at its first look, and the test
        # pass without anything followed).
        while not any("job.submitted" in line for line in printed):
            line = lines.get(timeout=60)
            assert line is not None, watcher.stderr.read()
            printed.append(line)
        cancel_job(Job.objects.get(pk=job.pk), "user:alice")
        assert watcher.wait(timeout=60) == 0, watcher.stderr.read()
    finally:
        watcher.kill()
    while (line := lines.get(timeout=60)) is not None:
        printed.append(line)
    out = "".join(printed)
    assert "job.submitted" in out and "job.cancelled" in out and "job.finished" in out
    assert out.rstrip().endswith(f"Job {job.pk} (watched) was cancelled.")


def test_events_follow_json_is_one_object_a_line(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, state=JobState.CANCELLED)
    alice_qm("submit", "--name", "x", "--gpus", "1")  # an event of another job: not in this one's stream

    r = alice_qm("events", str(job.pk), "--follow", "--json")

    assert r.code == 0 and r.out == ""  # a finished job without events: nothing, and it returns at once
    submitted = Job.objects.get(name="x")
    cancel_job(submitted, "user:alice")
    lines = alice_qm("events", str(submitted.pk), "--follow", "--json").out.splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["job.submitted", "job.cancelled", "job.finished"]


def test_the_command_after_dashes_keeps_its_words(alice_qm, tmp_path) -> None:
    """`-- python train.py --run "lr sweep 1"` was joined with spaces, and the node's /bin/sh ran
    `--run lr sweep 1`: four words. Several words are an argv, kept; one is a shell line as written."""
    argv = ["python", "my train.py", "--run", "lr sweep 1", "$HOME", "it's"]
    assert alice_qm("submit", "--name", "argv", "--gpus", "1", "--", *argv).code == 0
    assert alice_qm("submit", "--name", "line", "--gpus", "1", "--", "python a.py && python b.py > log").code == 0
    spec = tmp_path / "job.yaml"
    spec.write_text("name: listed\ngpus: 1\ncommand: [python, x.py, --tag, 'a b']\n")
    assert alice_qm("submit", str(spec)).code == 0

    assert shlex.split(Job.objects.get(name="argv").command) == argv
    assert Job.objects.get(name="line").command == "python a.py && python b.py > log"
    assert shlex.split(Job.objects.get(name="listed").command) == ["python", "x.py", "--tag", "a b"]
    named = alice_qm("submit", "--gpus", "1", "--", "/opt/my tools/train.py", "--x")
    assert named.code == 0 and "(train.py)" in named.out  # the name: the program's, as the shell reads it


def test_a_blank_command_without_a_name_is_a_sentence(alice_qm) -> None:
    r = alice_qm("submit", "--gpus", "1", "--", " ")

    assert r.code == 2 and "a job needs a name" in r.err and "Traceback" not in r.err


def test_cancel_array_cancels_every_live_task_in_one_line(alice_qm, fleet) -> None:
    r = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-4")
    array_id = str(Job.objects.filter(name="sweep").first().array_id)
    done = Job.objects.get(name="sweep", array_index=4)
    done.state = JobState.SUCCEEDED
    done.save(update_fields=["state"])

    cancelled = alice_qm("cancel", "--array", array_id)

    assert r.code == 0 and cancelled.code == 0, cancelled.err
    assert cancelled.out == f"Array {array_id} (sweep, 5 tasks): 4 cancelled, 0 stopping.\n"
    assert sorted(Job.objects.filter(name="sweep").values_list("state", flat=True)) == [
        JobState.CANCELLED] * 4 + [JobState.SUCCEEDED]
    again = alice_qm("cancel", "--array", array_id, "--json")
    assert again.code == 0 and (again.json()["cancelled"], again.json()["stopping"]) == (0, 0)


def test_cancel_array_refuses_what_is_no_array_of_yours(alice_qm, fleet) -> None:
    theirs = f.make_job(fleet.vision, array_id="6f1c1ad2-0000-4000-8000-000000000001", array_index=0)

    other = alice_qm("cancel", "--array", str(theirs.array_id))
    bad = alice_qm("cancel", "--array", "nope")
    both = alice_qm("cancel", "1", "--array", str(theirs.array_id))

    assert other.code == 1 and "No such job array, or not yours to see" in other.err
    assert bad.code == 2 and "'nope' is not an array id" in bad.err
    assert both.code == 2 and "not both" in both.err
    assert Job.objects.get(pk=theirs.pk).state == JobState.PENDING


def test_list_array_lists_only_that_arrays_tasks(alice_qm, fleet) -> None:
    assert alice_qm("submit", "--name", "mine", "--gpus", "1", "--array", "0-2").code == 0
    f.make_job(fleet.ml, name="other")
    array_id = str(Job.objects.filter(name="mine").first().array_id)

    r = alice_qm("list", "--array", array_id)
    bad = alice_qm("list", "--array", "0-2")

    assert r.code == 0 and r.out.count("mine") == 3 and "other" not in r.out
    assert bad.code == 2 and "'0-2' is not an array id" in bad.err


def test_an_array_whose_ids_are_not_consecutive_does_not_claim_a_range(alice_qm, fleet) -> None:
    """Concurrent submits may take ids between an array's tasks; 'jobs 413–512' then took in others' jobs."""
    from controlplane.cli.jobs.submit import array_span

    r = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-2")

    ids = sorted(Job.objects.filter(name="sweep").values_list("id", flat=True))
    assert r.code == 0 and f"jobs {ids[0]}–{ids[-1]} (team ml)" in r.out
    assert array_span([5, 6, 9]) == "jobs 5 to 9, not all consecutive"
    assert array_span([5, 6, 7]) == "jobs 5–7" and array_span([5]) == "jobs 5–5"


def test_wide_characters_in_a_name_keep_the_table_in_line(alice_qm, fleet) -> None:
    """`名前 🚀` takes 5 terminal columns, not 4: the columns after it were pushed out of line."""
    from controlplane.cli.output import width

    for name in ("名前 🚀", "ascii-name", "ünïcødé"):
        f.make_job(fleet.ml, name=name)

    lines = alice_qm("list").out.splitlines()[:4]

    starts = {line[: line.index(" ml ")] for line in lines[1:]}
    assert len({width(prefix) for prefix in starts}) == 1, lines
    assert width(lines[0][: lines[0].index("TEAM")]) == width(next(iter(starts))) + 1


def _serve_every_path(status: int, body: bytes):
    """A local HTTP server answering every GET and POST with ``status`` and this HTML page."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def failing_proxy():
    """A server answering every request as a failing proxy does: 502 with an HTML page."""
    yield from _serve_every_path(502, b"<html><body><h1>502 Bad Gateway</h1></body></html>")


def test_a_failing_server_is_not_called_a_wrong_url(qm, fleet, failing_proxy) -> None:
    """A 502 page from a proxy said 'an HTML page, not the Quartermaster API; check --url'."""
    r = qm("list", url=failing_proxy, extra_env={"QM_TOKEN": "x"})

    assert r.code == 1 and "Traceback" not in r.err and "<html" not in r.err
    assert "502 Bad Gateway" in r.err and "the server failed to answer" in r.err and "check --url" not in r.err


@pytest.mark.parametrize("interval", ["0", "-1", "nan", "inf", "1e300"])
def test_events_follow_refuses_an_interval_it_cannot_wait(alice_qm, fleet, interval) -> None:
    job = f.make_job(fleet.ml)

    r = alice_qm("events", str(job.pk), "--follow", "--interval", interval)

    assert r.code == 2 and "--interval" in r.err and "Traceback" not in r.err


def test_yaml_files_qm_cannot_send_as_they_are_are_sentences_or_sent_as_text(alice_qm, tmp_path) -> None:
    """Three tracebacks: a file not in UTF-8, `env:` a list with --env, and a value YAML reads as
    a date (`name: 2026-11-29`: "Object of type date is not JSON serializable")."""
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\ngpus: 1\n")
    env_list = tmp_path / "env.yaml"
    env_list.write_text("name: x\ngpus: 1\nenv: [A]\n")
    dated = tmp_path / "dated.yaml"
    dated.write_text("name: 2026-11-29\ngpus: 1\n")

    r_latin = alice_qm("submit", str(latin))
    r_env = alice_qm("submit", str(env_list), "--env", "B=1")
    r_dated = alice_qm("submit", str(dated))

    assert r_latin.code == 2 and "is not UTF-8 text" in r_latin.err
    assert r_env.code == 2 and "env in the YAML file must be a mapping" in r_env.err
    assert r_dated.code == 0, r_dated.err
    assert Job.objects.get().name == "2026-11-29"
    assert not any("Traceback" in r.err for r in (r_latin, r_env, r_dated))


@pytest.mark.parametrize(("url", "words"), [
    ("http://[::1", "Invalid IPv6 URL"),  # was a ValueError traceback
    ("http://localhost:8000/?team=ml", "no ?query or #fragment"),  # was sent as .../?team=ml/api/v1/jobs/
    ("http://localhost:8000#x", "no ?query or #fragment"),
])
def test_server_urls_qm_cannot_use_are_sentences(qm, fleet, url, words) -> None:
    r = qm("list", url=url)

    assert r.code == 2 and words in r.err and "Traceback" not in r.err


def test_a_token_with_a_new_line_is_said_to_be_the_tokens_fault(alice_qm, fleet) -> None:
    """It said "cannot reach <server>" (exit 2), as if the server were down."""
    r = alice_qm("list", extra_env={"QM_TOKEN": "abc\ndef"})

    assert r.code == 1 and "check $QM_TOKEN" in r.err and "cannot reach" not in r.err


def test_a_config_file_edited_into_wrong_types_is_a_sentence(qm, fleet, tmp_path) -> None:
    config = tmp_path / "config" / "quartermaster" / "config.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"url": 5, "token": ["x"]}')

    r = qm("list")
    out = qm("logout")

    assert r.code == 1 and "url should be text" in r.err and "Traceback" not in r.err
    assert out.code == 0 and not config.exists()  # logout removes a config it cannot read


@pytest.fixture
def catch_all_site():
    """A web site that answers every path 200 with its home page (a single-page app)."""
    yield from _serve_every_path(200, b"<!doctype html><html><body>Welcome</body></html>")


def test_a_site_answering_200_with_a_page_is_not_the_api(qm, fleet, catch_all_site) -> None:
    """A 200 HTML answer ended in a JSONDecodeError traceback."""
    for args in (("list",), ("login", "-u", "alice", "--password-stdin")):
        r = qm(*args, url=catch_all_site, stdin="alice\n", extra_env={"QM_TOKEN": "x"})
        assert r.code == 1 and "is not the Quartermaster API's JSON (text/html)" in r.err, r.err
        assert "Traceback" not in r.err


def test_list_sort_orders_the_table(alice_qm, fleet) -> None:
    f.make_job(fleet.ml, name="second", queue_position=2)
    f.make_job(fleet.ml, name="first", queue_position=1)

    r = alice_qm("list", "--sort", "queue_position")
    bad = alice_qm("list", "--sort", "colour")

    assert r.code == 0 and [line.split()[1] for line in r.out.splitlines()[1:3]] == ["first", "second"]
    assert bad.code == 1 and "ordering" in bad.err
    # a descending field as a user types it, not only as --sort=-queue_position (argparse took
    # '-queue_position' for an option)
    down = alice_qm("list", "--sort", "-queue_position")
    assert down.code == 0 and [line.split()[1] for line in down.out.splitlines()[1:3]] == ["second", "first"]


def test_status_of_a_waiting_job_gives_its_place_and_eta(alice_qm, fleet) -> None:
    eta = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    job = f.make_job(fleet.ml, pending_code="QuotaExceeded", pending_message="over quota", queue_position=4, eta=eta)

    out = alice_qm("status", str(job.pk)).out

    assert re.search(r"^queue position:\s+4$", out, re.M), out
    assert re.search(rf"^latest start:\s+{eta:%Y-%m-%d %H:%M:%S} UTC$", out, re.M), out
    running = alice_qm("status", str(f.make_job(fleet.ml, state=JobState.RUNNING).pk)).out
    assert re.search(r"^queue position:\s+-$", running, re.M) and re.search(r"^latest start:\s+-$", running, re.M)
