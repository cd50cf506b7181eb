"""A table's free-text column (a job's NAME, a node's STATE with its reason, a hook's URL) had no
bound: one job named `llama-3-70b-instruct-finetune-…-run17` pushed every row of `qm list` past an
80-column terminal, so each wrapped and no column lined up. On a terminal (or with COLUMNS set)
such a column is now cut to fit, in the middle, `llama-3-70…-run17` (an array task keeps its
` [3]`); `--wide`
and `--json` give it whole, and so does a pipe to a script, as `ps` and `systemctl` do."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.choices import JobState
from tests.controlplane import factories as f
from tests.controlplane.cli.conftest import REPO

pytestmark = pytest.mark.slow

LONG = "llama-3-70b-instruct-finetune-lr3e-4-warmup2000-cosine-seq8192-run17"
AT_80 = {"COLUMNS": "80"}


def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_a_long_job_name_is_cut_so_the_list_fits_80_columns(alice_qm, fleet) -> None:
    f.make_job(fleet.ml, name=LONG, submitter=fleet.users["owner"])
    f.make_job(fleet.ml, name="eval", submitter=fleet.users["owner"])

    r = alice_qm("list", extra_env=AT_80)

    assert r.code == 0, r.err
    assert _widest(r.out) <= 80, r.out
    rows = r.out.splitlines()
    assert rows[0].split()[:3] == ["ID", "NAME", "TEAM"]
    long_row = next(line for line in rows if "llama" in line)
    name = long_row.split()[1]
    head, tail = name.split("…")
    assert LONG.startswith(head) and LONG.endswith(tail) and len(head) > len(tail) > 0 and len(name) >= 10, long_row
    assert " eval " in r.out  # a short name is left as it is
    assert "NAME cut to fit 80 columns: --wide shows it whole" in r.err


def test_names_cut_still_tell_the_jobs_apart_by_their_ends(alice_qm, fleet) -> None:
    f.make_job(fleet.ml, name=LONG, submitter=fleet.users["owner"])
    for n in (91, 92):
        f.make_job(fleet.ml, name=f"notebook-session-of-the-nightly-eval-{n:03d}", submitter=fleet.users["owner"],
                   pending_code="QuotaExceeded")

    r = alice_qm("list", extra_env=AT_80)

    assert _widest(r.out) <= 80, r.out
    names = [line.split()[1] for line in r.out.splitlines()[1:] if "…" in line]
    assert len(names) == 3 and len(set(names)) == 3, r.out
    assert {name[-2:] for name in names} == {"92", "91", "17"}, r.out


def test_wide_json_and_a_pipe_show_the_name_whole(alice_qm, fleet) -> None:
    f.make_job(fleet.ml, name=LONG, submitter=fleet.users["owner"])

    wide = alice_qm("list", "--wide", extra_env=AT_80)
    assert wide.code == 0 and LONG in wide.out and _widest(wide.out) > 80 and "cut to fit" not in wide.err
    assert alice_qm("list", "--json", extra_env=AT_80).json()["results"][0]["name"] == LONG
    # No terminal and no COLUMNS: a script's `qm list | grep …` reads every name whole.
    piped = alice_qm("list")
    assert LONG in piped.out and "cut to fit" not in piped.err


def test_an_array_task_cut_keeps_its_index(alice_qm, fleet) -> None:
    array = "6f1c1ad2-0000-4000-8000-000000000001"
    for index in range(2):
        f.make_job(fleet.ml, name=LONG, array_id=array, array_index=index, submitter=fleet.users["owner"])

    r = alice_qm("list", extra_env=AT_80)

    assert _widest(r.out) <= 80, r.out
    names = [line.split("  ")[1].strip() for line in r.out.splitlines()[1:3]]
    assert names[0].endswith("… [1]") and names[1].endswith("… [0]"), r.out


def test_history_and_sprio_cut_the_name_too(alice_qm, fleet) -> None:
    now = timezone.now()
    f.make_job(fleet.ml, name=LONG, submitter=fleet.users["owner"], state=JobState.CANCELLED,
               started_at=now - timedelta(minutes=5), finished_at=now - timedelta(minutes=1))
    f.make_job(fleet.ml, name=LONG + "-waiting", submitter=fleet.users["owner"], gpus=8)

    history = alice_qm("history", extra_env=AT_80)
    sprio = alice_qm("sprio", extra_env=AT_80)

    assert history.code == 0 and sprio.code == 0, history.err + sprio.err
    for run in (history, sprio):
        header = run.out.splitlines()[next(i for i, line in enumerate(run.out.splitlines()) if " NAME " in line)]
        row = next(line for line in run.out.splitlines() if "llama" in line)
        assert len(row) <= max(80, len(header)) and "llama-" in row and "…" in row and LONG not in row, run.out


def test_a_nodes_long_cordon_reason_is_cut_on_its_row(qm, fleet) -> None:
    reason = "XID 79 on GPU 3: fell off the bus during the nightly burn-in, RMA ticket 4471 opened with the vendor"
    assert qm("login", "--username", "root", "--password-stdin", stdin="root\n").code == 0
    assert qm("nodes", "cordon", "h100-1", "--reason", reason).code == 0

    r = qm("nodes", extra_env=AT_80)

    assert r.code == 0, r.err
    assert _widest(r.out) <= 80 and "cordoned: XID 79" in r.out and reason not in r.out, r.out
    assert reason in qm("nodes", "--wide", extra_env=AT_80).out


def test_on_a_real_80_column_terminal_the_list_fits(alice_qm, fleet) -> None:
    """The size read from the terminal itself (no COLUMNS): what a researcher's window is."""
    f.make_job(fleet.ml, name=LONG, submitter=fleet.users["owner"])
    env = {k: v for k, v in alice_qm.env.items() if k not in ("COLUMNS", "LINES")}
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    process = subprocess.Popen([sys.executable, "-m", "controlplane.cli.main", "list"], stdin=follower,
                               stdout=follower, stderr=follower, env=env, cwd=REPO)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the terminal's other end has closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert process.wait(timeout=60) == 0
    text = seen.decode().replace("\r\n", "\n")
    assert "llama-3" in text and LONG not in text and _widest(text.split("NAME cut")[0]) <= 80, text


def test_the_note_comes_under_the_table_in_one_file(alice_qm, fleet) -> None:
    """`qm list > out.txt 2>&1`: the table was written at exit, after the note on stderr."""
    f.make_job(fleet.ml, name=LONG, submitter=fleet.users["owner"])
    # As a user's shell runs it: standard output to a file is buffered.
    env = {**{k: v for k, v in alice_qm.env.items() if k != "PYTHONUNBUFFERED"}, **AT_80}
    done = subprocess.run([sys.executable, "-m", "controlplane.cli.main", "list"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO, timeout=60)
    lines = done.stdout.splitlines()
    note = next(i for i, line in enumerate(lines) if line.startswith("NAME cut to fit"))
    assert lines[0].startswith("ID") and "llama-" in lines[1] and note > 1, done.stdout


def test_a_hooks_long_url_is_cut_in_notify_list(alice_qm, fleet) -> None:
    url = "https://hooks.example.org/services/T024BE7LD/B08F2KJ1Q3V/" + "x" * 40
    assert alice_qm("notify", "add", url).code == 0  # the default events: six of them, 50 characters

    r = alice_qm("notify", "list", extra_env=AT_80)

    assert r.code == 0, r.err
    assert _widest(r.out) <= 80 and url not in r.out, r.out
    # its start and end kept around the cut (how much of each depends on the ID column's width:
    # a 3-digit hook id, in a full run, leaves two columns fewer than a 1-digit one)
    cell = next(word for word in r.out.split() if word.startswith("https://"))
    start, cut, end = cell.partition("…")
    assert cut and len(start) > len("https://") and url.startswith(start) and url.endswith(end), cell
    assert "URL, EVENTS cut to fit 80 columns: --wide shows them whole." in r.err
    assert url in alice_qm("notify", "list", "--wide", extra_env=AT_80).out
