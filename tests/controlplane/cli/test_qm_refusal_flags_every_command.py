"""A refusal of a command other than `qm submit` named the API's field alone, never the flag
typed: `qm requeue --array ID --states bogus` said `states.0: "bogus" cannot be requeued`,
`qm showback --window 3x` `window: '3x' is not a window`, `qm list --state runing` `state: ...`.
Each field now names the flag and the value that set it, as a refused submit does, whichever
command it is (main.FIELD_FLAGS); a refused `--csv` too, whose answer names no field."""

from __future__ import annotations

import pytest

from tests.controlplane import factories as f

pytestmark = pytest.mark.slow


def test_a_refused_flag_is_named_by_every_command_that_sends_it(alice_qm, fleet) -> None:
    array_id = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-1", "--json").json()["array_id"]
    job = f.make_job(fleet.ml, fleet.research, name="w", gpus=8)
    long = "x" * 201

    said = {
        "requeue --states": alice_qm("requeue", "--array", array_id, "--states", "bogus"),
        "list --state": alice_qm("list", "--state", "runing"),
        "squeue --sort": alice_qm("squeue", "--sort", "bogus"),
        "showback --window": alice_qm("showback", "--window", "3x"),
        # (history --exit-code 99999999999 was the case here: qm now refuses a code past 255 itself,
        # test_qm_history_exit_code_range.py)
        "history --user": alice_qm("history", "--user", "nobody"),
        "logs --generation": alice_qm("logs", str(job.pk), "--generation", "-1"),
        "hold --array --reason": alice_qm("hold", "--array", array_id, "--reason", long),
    }

    lines = {what: run.err.splitlines() for what, run in said.items()}
    assert all(run.code == 1 and run.out == "" for run in said.values()), said
    assert all(err[0] == "error: Invalid request." for err in lines.values()), lines
    assert lines["requeue --states"][1] == (
        '  states.0 (--states bogus): "bogus" cannot be requeued; choose among running, succeeded, failed, cancelled, '
        "timed_out")
    assert lines["list --state"][1].startswith("  state (--state runing): 'runing' is not a valid choice; ")
    # (squeue --offset -1 was the case here: qm now refuses it itself, test_qm_counts_refused_before_asking.py.)
    assert lines["squeue --sort"][1].startswith("  ordering (--sort bogus): 'bogus' is not a field this list sorts by; ")
    assert lines["showback --window"][1].startswith("  window (--window 3x): '3x' is not a window: ")
    assert lines["history --user"][1].startswith("  user (--user nobody): ")
    assert lines["logs --generation"][1].startswith("  generation (--generation -1): -1 is out of range")
    # The value typed is cut short where it is long: the message says how long it was.
    assert lines["hold --array --reason"][1] == f"  reason (--reason {'x' * 59}…): at most 200 characters (201 given)"


def test_a_refused_job_among_several_names_the_flag_on_its_own_lines(alice_qm, fleet) -> None:
    job = f.make_job(fleet.ml, fleet.research, name="w", gpus=8)

    run = alice_qm("hold", str(job.pk), "--reason", "a\nb" + "x" * 200)

    assert run.code == 1
    assert run.err.splitlines() == [f"error: job {job.pk}: Invalid request.",
                                    f"  reason (--reason a\\nb{'x' * 55}…): contains a control character (U+000A, a new "
                                    "line) at position 2: it is one line of text"]


@pytest.mark.parametrize("args", [("showback", "--window", "3x", "--csv"),
                                  ("history", "--user", "nobody", "--format", "csv")])
def test_a_refused_csv_names_the_flag_too(qm, fleet, args) -> None:
    """The CSV's refusal is one sentence in one cell: it said `Invalid request. window: ...`."""
    assert qm("login", "-u", "finn" if args[0] == "showback" else "alice", "--password-stdin",
              stdin=("finn" if args[0] == "showback" else "alice") + "\n").code == 0

    run = qm(*args)

    assert run.code == 1 and run.out == ""
    assert run.err.splitlines()[1].startswith(f"  {'window' if args[0] == 'showback' else 'user'} "
                                              f"({args[1]} {args[2]}): "), run.err
