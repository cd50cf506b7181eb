"""`qm` end to end: a real subprocess against a live server and PostgreSQL."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from controlplane.choices import JobState, NodeState
from controlplane.models import Job, Node
from tests.controlplane import factories as f
from tests.controlplane.cli.conftest import REPO

pytestmark = pytest.mark.slow


def test_login_stores_the_token_privately_and_whoami_uses_it(qm, fleet, tmp_path) -> None:
    login = qm("login", "--username", "alice", "--password-stdin", stdin="alice\n")

    assert login.code == 0, login.err
    assert "Logged in" in login.out and "member of ml" in login.out
    config = tmp_path / "config" / "quartermaster" / "config.json"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    who = qm("whoami", "--json")
    assert who.code == 0 and who.json()["username"] == "alice" and who.json()["default_team"] == "ml"


def test_whoami_says_a_fleet_wide_role_in_words(qm, fleet) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("whoami")

    assert r.code == 0, r.err
    assert "finance (fleet-wide)" in r.out and "@-" not in r.out


def test_wrong_password_prints_the_apis_message(qm, fleet) -> None:
    r = qm("login", "--username", "alice", "--password-stdin", stdin="nope\n")

    assert r.code == 1
    assert "Wrong username or password" in r.err and "Traceback" not in r.err


def test_commands_before_login_say_to_log_in(qm, fleet) -> None:
    r = qm("list")

    assert r.code == 1 and "Run `qm login` first" in r.err and "Traceback" not in r.err


def test_unreachable_server_is_exit_2_with_a_sentence(qm, fleet) -> None:
    r = qm("list", url="http://127.0.0.1:9")

    assert r.code == 2 and "cannot reach http://127.0.0.1:9" in r.err and "Traceback" not in r.err


def test_submit_with_flags_then_list_and_status_show_it(alice_qm) -> None:
    r = alice_qm("submit", "--name", "train-7b", "--gpus", "16", "--gpus-per-node", "8", "--gpu-type", "H100-80GB",
                 "--time", "4h", "--priority", "research", "--", "python", "train.py", "--lr", "3e-4")

    assert r.code == 0, r.err
    assert "Submitted job" in r.out and "16 GPUs" in r.out and "limit 4 h" in r.out
    job = Job.objects.get(name="train-7b")
    assert (job.gpus, job.gpus_per_node, job.gpu_types, job.runtime_limit_s) == (16, 8, ["H100-80GB"], 4 * 3600)
    assert job.command == "python train.py --lr 3e-4"
    listing = alice_qm("list")
    assert listing.code == 0 and "train-7b" in listing.out and "STATE" in listing.out.splitlines()[0]
    detail = alice_qm("status", str(job.pk))
    assert "16 GPUs, 8 per node" in detail.out and "research" in detail.out


def test_submit_from_yaml_as_an_array(alice_qm, tmp_path) -> None:
    spec = tmp_path / "sweep.yaml"
    spec.write_text("name: sweep\ngpus: 1\ntime: 30m\npriority: production\nenv:\n  LR: '0.1'\n"
                    "command: [python, sweep.py]\narray: 0-9\n")

    r = alice_qm("submit", str(spec))

    assert r.code == 0, r.err
    assert "10 tasks" in r.out
    tasks = Job.objects.filter(name="sweep").order_by("array_index")
    assert tasks.count() == 10 and tasks[9].env["QM_ARRAY_INDEX"] == "9" and tasks[0].env["LR"] == "0.1"
    assert tasks[0].runtime_limit_s == 1800 and tasks[0].priority_class.name == "production"


def test_flags_override_the_yaml_file(alice_qm, tmp_path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: base\ngpus: 1\n")

    assert alice_qm("submit", str(spec), "--gpus", "4").code == 0

    assert Job.objects.get(name="base").gpus == 4


def test_impossible_shape_prints_the_field_and_reason_not_a_traceback(alice_qm) -> None:
    r = alice_qm("submit", "--name", "big", "--gpus", "16", "--gpus-per-node", "16")

    assert r.code == 1
    assert "gpus_per_node (--gpus-per-node 16): asks 16 GPUs on one node; the largest node has 8" in r.err
    assert "Traceback" not in r.err and not Job.objects.exists()


def test_bad_duration_is_refused_before_any_request(alice_qm) -> None:
    r = alice_qm("submit", "--name", "x", "--gpus", "1", "--time", "soon")

    assert r.code == 2 and "--time: 'soon' is not a duration" in r.err


def test_time_in_decimal_hours_is_taken_as_the_submit_form_takes_them(alice_qm) -> None:
    """The form's *Runtime limit (hours)* takes 1.5; `--time 1.5h` was refused as no duration."""
    r = alice_qm("submit", "--name", "ninety", "--gpus", "1", "--time", "1.5h", "--", "true")

    assert r.code == 0, r.err
    assert "limit 1 h 30 min" in r.out and Job.objects.get(name="ninety").runtime_limit_s == 5400


def test_explain_shows_reason_position_and_remedy(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, name="waiting", pending_code="QuotaExceeded", queue_position=2,
                     pending_message="needs 16 H100-80GB GPUs; team ml has 4 left",
                     pending_would_start_if="12 GPUs of ml's quota free up",
                     eta=timezone.now() + timezone.timedelta(hours=1))

    r = alice_qm("explain", str(job.pk))

    assert r.code == 0, r.err
    assert f"Job {job.pk} (waiting) is pending: QuotaExceeded" in r.out
    assert "needs 16 H100-80GB GPUs" in r.out and re.search(r"queue position:\s+2\n", r.out)
    assert "12 GPUs of ml's quota free up" in r.out


def test_explain_of_another_teams_job_is_not_found(alice_qm, fleet) -> None:
    job = f.make_job(fleet.vision)

    r = alice_qm("explain", str(job.pk))

    assert r.code == 1 and f"No job {job.pk}, or not yours to see." in r.err


def test_cancel_cancels_and_reports(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml)

    r = alice_qm("cancel", str(job.pk))

    assert r.code == 0 and f"Job {job.pk} cancelled." in r.out
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    again = alice_qm("cancel", str(job.pk))
    assert again.code == 1 and "only pending or running jobs can be cancelled" in again.err


def test_slurm_users_first_words_squeue_and_scancel_list_and_cancel(alice_qm, fleet) -> None:
    # Submitted 5 days and 30 s ago, its age reads "5d" for the next 30 s: the two listings
    # compared below were a second apart and once differed, "0s" against "1s".
    waiting = f.make_job(fleet.ml, name="sweep-3", submitted_at=timezone.now() - timedelta(days=5, seconds=30))
    f.make_job(fleet.ml, name="done-1", state=JobState.SUCCEEDED)

    listed = alice_qm("squeue", "-n", "sweep-3")

    assert listed.code == 0, listed.err
    assert listed.out == alice_qm("list", "-n", "sweep-3").out
    assert "sweep-3" in listed.out and "done-1" not in alice_qm("squeue").out
    cancelled = alice_qm("scancel", str(waiting.pk))
    assert cancelled.code == 0 and f"Job {waiting.pk} cancelled." in cancelled.out
    assert Job.objects.get(pk=waiting.pk).state == JobState.CANCELLED
    assert "list (squeue)" in alice_qm("--help").out and "cancel (scancel)" in alice_qm("--help").out


def test_list_json_is_the_apis_page(alice_qm, fleet) -> None:
    f.make_job(fleet.ml, name="one")

    r = alice_qm("list", "--json")

    assert r.code == 0 and r.json()["count"] == 1 and r.json()["results"][0]["name"] == "one"


def test_admin_cordons_a_node_by_name(qm, fleet) -> None:
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    r = qm("cordon", "h100-2")

    assert r.code == 0 and "h100-2: ready → cordoned: no new work goes there; nothing runs there." in r.out
    assert Node.objects.get(name="h100-2").state == NodeState.CORDONED
    assert "h100-2" in qm("nodes").out


def test_admin_cordons_a_down_node_for_its_return(qm, fleet) -> None:
    Node.objects.filter(name="h100-2").update(state=NodeState.DOWN)
    assert qm("login", "-u", "root", "--password-stdin", stdin="root\n").code == 0

    r = qm("cordon", "h100-2")

    assert r.code == 0 and r.out.strip() == "h100-2 is down; cordon recorded: it returns cordoned when its agent registers again.", r.err
    row = next(line for line in qm("nodes").out.splitlines() if line.startswith("h100-2 "))
    assert "down (returns cordoned)" in row


def test_member_cannot_cordon(alice_qm) -> None:
    r = alice_qm("cordon", "h100-2")

    assert r.code == 1 and "Only admins" in r.err


def test_showback_by_team_prints_a_table_or_says_it_is_empty(qm, fleet) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--window", "7d")

    assert r.code == 0, r.err
    assert r.out.startswith("Showback by team")
    # the window's ends read like every other qm time, not as raw ISO text
    assert re.match(r"Showback by team, \d{4}-\d\d-\d\d \d\d:\d\d:\d\d → \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(USD\)",
                    r.out), r.out.splitlines()[0]
    month = qm("showback", "--month", "2026-11", "--json")
    assert month.code == 0 and "data" in month.json()


def test_showback_bad_window_prints_the_apis_message(qm, fleet) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--window", "lately")

    assert r.code == 1 and "window" in r.err and "Traceback" not in r.err


def test_qm_console_script_is_installed_and_answers_help() -> None:
    script = shutil.which("qm", path=str(Path(sys.executable).parent)) or shutil.which("qm")
    assert script is not None, "the qm console script is missing: pip install -e ."
    done = os.popen(f"{script} --help").read()

    assert "submit" in done and "showback" in done


def test_showback_csv_prints_finances_csv(qm, fleet) -> None:
    # Found by hand: `qm showback --csv` answered "Could not satisfy the request Accept header."
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--window", "7d", "--csv")

    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0].startswith("team,gpu_hours_allocated,") and lines[-1].startswith("TOTAL,")


def test_showback_csv_with_a_bad_window_prints_the_apis_message(qm, fleet) -> None:
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--window", "lately", "--csv")

    assert r.code == 1 and r.out == ""
    assert r.err.startswith("error: Invalid request.\n  window (--window lately): 'lately' is not a window")
    assert "Traceback" not in r.err


def test_login_takes_the_server_as_the_readme_spells_it(qm, fleet, live_server) -> None:
    r = qm("login", "--server", live_server.url, "-u", "alice", "--password-stdin", stdin="alice\n")

    assert r.code == 0, r.err
    assert f"Logged in to {live_server.url} as alice" in r.out


@pytest.mark.parametrize("url", ["localhost:8101", "ftp://example.org", "http://localhost:99999", "http://exa mple"])
def test_a_malformed_server_url_is_a_sentence_not_a_traceback(qm, fleet, url) -> None:
    # Found by hand: `qm login --url localhost:8101` printed a requests traceback.
    r = qm("login", "--url", url, "-u", "alice", "--password-stdin", stdin="alice\n")

    assert r.code == 2 and "Traceback" not in r.err, r.err
    assert r.err.startswith("error: ") and "http://" in r.err


def test_a_server_url_with_the_api_prefix_still_works(qm, fleet, live_server) -> None:
    r = qm("login", "--url", f"{live_server.url}/api/v1/", "-u", "alice", "--password-stdin", stdin="alice\n")

    assert r.code == 0, r.err
    assert qm("whoami", "--json").json()["username"] == "alice"


def test_a_url_that_is_not_the_api_says_so_instead_of_printing_html(qm, fleet, live_server) -> None:
    r = qm("login", "--url", f"{live_server.url}/elsewhere", "-u", "alice", "--password-stdin", stdin="alice\n")

    assert r.code == 1 and "<html" not in r.err.lower() and "Traceback" not in r.err
    assert "not the Quartermaster API" in r.err


def test_options_before_the_command_are_not_dropped(alice_qm) -> None:
    # Found by hand: `qm --url http://localhost:1 whoami` asked the logged-in server, and
    # `qm --json whoami` printed a table: the command's own defaults overwrote them.
    who = alice_qm("--json", "whoami")
    assert who.code == 0 and who.json()["username"] == "alice"

    r = alice_qm("--url", "http://127.0.0.1:9", "whoami")
    assert r.code == 2 and "cannot reach http://127.0.0.1:9" in r.err

    after = alice_qm("whoami", "--json")  # given after the command, as before
    assert after.code == 0 and after.json()["username"] == "alice"


def test_output_piped_into_a_reader_that_stops_early_is_no_traceback(alice_qm, fleet, tmp_path, live_server) -> None:
    # Found by hand: `qm whoami | head -3` ended in a BrokenPipeError traceback.
    # More than a pipe holds (64 KiB), so the reader is gone while qm still writes.
    for i in range(500):
        f.make_job(fleet.ml, name=f"{i:04d}-" + "x" * 120)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "QM_URL": live_server.url, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        f"{shlex.quote(sys.executable)} -m controlplane.cli.main list --all --limit 1000 | head -n 2",
        shell=True, capture_output=True, text=True, env=env, cwd=REPO, timeout=60,
    )

    assert len(done.stdout.splitlines()) == 2 and "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_control_characters_stored_in_a_job_are_printed_visibly(alice_qm, fleet) -> None:
    # A row written before names were checked, or any free text: the terminal never gets it raw.
    job = f.make_job(fleet.ml, name="evil\x1b[31mRED\nline2", command="run\x1b]0;title\x07")

    listed = alice_qm("list")
    status = alice_qm("status", str(job.pk))

    assert listed.code == 0 and status.code == 0
    for out in (listed.out, status.out):
        assert "\x1b" not in out and "\x07" not in out
        assert "evil\\x1b[31mRED\\nline2" in out
    assert len([line for line in listed.out.splitlines() if str(job.pk) in line]) == 1


def test_explain_prints_a_stored_name_with_control_characters_visibly(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, name="bad\x1b[2Jname", pending_code="QuotaExceeded",
                     pending_message="needs 1 GPU\x1b[31m", queue_position=1)

    r = alice_qm("explain", str(job.pk))

    assert r.code == 0 and "\x1b" not in r.out and "bad\\x1b[2Jname" in r.out and "GPU\\x1b[31m" in r.out


def test_showback_table_columns_add_up_and_idle_capacity_is_said_apart(qm, fleet) -> None:
    """Found by QA: `qm showback` put __idle__'s unallocated GPU-hours in the GPU-H ALLOC
    column, so the column did not add up to TOTAL (4.48 + 4.37 + 2.97 ≠ 7.34)."""
    from controlplane.services import accounting
    from tests.controlplane.accounting.builders import hold, running_job

    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=8, started_at=start, priority_class=fleet.research)
    hold(job, [(fleet.nodes[1], 8)], start, start + timedelta(hours=1))
    accounting.catch_up(now)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "team", "--window", "1d")

    assert r.code == 0, r.err
    rows = {line.split()[0]: line.split()[1:] for line in r.out.splitlines()[2:] if line.strip()}
    assert rows["ml"][0] == "8.00" and rows["TOTAL"][0] == "8.00" and rows["__idle__"][0] == "-"
    idle_line = [line for line in r.out.splitlines() if line.startswith("__idle__:")]
    assert len(idle_line) == 1 and "GPU-hours of capacity no job held" in idle_line[0]


def test_showback_by_project_says_what_a_teams_unallocated_row_is(qm, fleet) -> None:
    """`qm showback --by project` printed `ml/__unallocated__` with no word of what it is (h50's
    walk, 5 Dec): the page says "ml (no project)", the table keeps the API's name."""
    from controlplane.services import accounting
    from tests.controlplane.accounting.builders import hold, running_job

    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(hours=2)
    job = running_job(fleet.ml, gpus=8, started_at=start, priority_class=fleet.research, project=None)
    hold(job, [(fleet.nodes[1], 8)], start, start + timedelta(hours=1))
    accounting.catch_up(now)
    assert qm("login", "-u", "finn", "--password-stdin", stdin="finn\n").code == 0

    r = qm("showback", "--by", "project", "--window", "1d")

    assert r.code == 0, r.err
    assert "ml/__unallocated__" in [line.split()[0] for line in r.out.splitlines()[2:] if line.strip()]
    assert "ml/__unallocated__: the jobs of that team that named no project." in r.out.splitlines()
