"""A flag a command does not take is refused by that command: its usage (which lists its flags)
and `qm submit: error: ...`, exit 2; for a flag of Slurm's, what qm does instead, and for a
misspelling the flag meant. argparse's refusal came from `qm` itself: `usage: qm [-h] [--url URL]
[--json] COMMAND ...` and `qm: error: unrecognized arguments: --gres`, naming no flag of the
command, nor what a Slurm user should type instead."""

from __future__ import annotations

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_a_slurm_flag_is_refused_by_the_command_with_what_qm_does_instead(alice_qm, fleet) -> None:
    run = alice_qm("submit", "-G", "8", "--gres=gpu:8", "-N", "2", "--", "python", "train.py")

    assert run.code == 2 and run.out == ""
    lines = run.err.splitlines()
    assert lines[0].startswith("usage: qm submit [-h]")
    assert "--gpus-per-node" in run.err  # the command's own flags, in its usage
    assert any(line.startswith("qm submit: error: unrecognized arguments: --gres=gpu:8 -N") for line in lines)
    assert "  --gres: give --gpus N and --gpu-type TYPE (qm sinfo lists the types)" in lines
    assert any(line.startswith("  -N: give --gpus N and --gpus-per-node 8") for line in lines)
    assert lines[-1] == "  (`qm submit --help` lists its flags)"
    assert not Job.objects.exists()


def test_squeue_j_says_how_qm_names_a_job(alice_qm, fleet) -> None:
    run = alice_qm("squeue", "-j", "12")

    assert run.code == 2
    assert run.err.startswith("usage: qm list [-h]")
    assert "qm list: error: unrecognized arguments: -j 12" in run.err
    assert "  -j: qm names a job without -j: qm status JOB (scontrol show job), qm runs JOB (sacct -j)" in run.err


def test_a_misspelled_flag_is_refused_with_the_one_meant(alice_qm, fleet) -> None:
    run = alice_qm("list", "--sate", "running")

    assert run.code == 2
    assert "qm list: error: unrecognized arguments: --sate running\n  --sate: did you mean --state?" in run.err


def test_a_subcommand_of_a_subcommand_refuses_with_its_own_usage(alice_qm, fleet) -> None:
    run = alice_qm("notify", "add", "https://hooks.example.org/x", "--bogus")

    assert run.code == 2
    assert run.err.startswith("usage: qm notify add [-h]")
    assert "qm notify add: error: unrecognized arguments: --bogus" in run.err


def test_a_password_on_the_command_line_is_refused_with_how_qm_takes_one(alice_qm, fleet) -> None:
    # argparse took `--password` for the beginning of --password-stdin and refused only the secret.
    run = alice_qm("login", "--username", "alice", "--password", "alice")

    assert run.code == 2 and run.out == ""
    assert "qm login: error: unrecognized arguments: --password alice" in run.err
    assert ("  --password: qm login takes no password on its command line, where shell history and `ps` keep "
            "it: type it when asked, pipe it with --password-stdin, or set $QM_PASSWORD") in run.err
