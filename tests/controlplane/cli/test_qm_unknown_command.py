"""A command qm does not have is refused, exit 2, with what to type instead: for the name of a
Slurm tool (`qm sbatch`, `qm scontrol`, `qm sattach`) the qm command that does its work, for a
misspelling (`qm staus`) or a near name (`qm queue`) the command meant. Found on the researcher's
walk (7 Dec): `qm queue` and `qm sbatch` were refused with argparse's list of 31 commands and
nothing else, while a Slurm flag given to a command is told what qm takes instead
(test_qm_unknown_flags.py). Refused before any request: no server is needed."""

from __future__ import annotations

import pytest

from controlplane.cli.main import main


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    with pytest.raises(SystemExit) as ended:
        main(list(argv))
    assert ended.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert lines[0].startswith("usage: qm [-h]")
    assert any(line.startswith(f"qm: error: argument COMMAND: invalid choice: '{argv[0]}'") for line in lines)
    return lines


@pytest.mark.parametrize(("typed", "instead"), [
    ("sbatch", "  sbatch: qm submit (its flags are sbatch's: -J, -G, -t, -A, --wrap; qm submit --help)"),
    ("srun", "  srun: qm submit, then qm logs JOB -f --exit-with-job to follow it and exit as it did"),
    ("scontrol", "  scontrol: qm status JOB (show job), qm hold, release, requeue and update JOB"),
    ("sattach", "  sattach: qm logs JOB -f"),
    ("queue", "  queue: qm list (squeue): your team's waiting and running jobs, each with its place and start"),
])
def test_a_slurm_tools_name_is_told_the_qm_command_that_does_its_work(capsys, typed: str, instead: str) -> None:
    assert _refused(capsys, typed, "412")[-1] == instead


@pytest.mark.parametrize(("typed", "meant"), [("staus", "status"), ("lst", "list"), ("histroy", "history"),
                                              ("expain", "explain")])
def test_a_misspelled_command_is_told_the_one_meant(capsys, typed: str, meant: str) -> None:
    assert _refused(capsys, typed)[-1] == f"  {typed}: did you mean qm {meant}?"


def test_a_word_like_no_command_is_told_only_the_commands(capsys) -> None:
    lines = _refused(capsys, "frobnicate")
    assert lines[-1].startswith("qm: error: argument COMMAND: invalid choice: 'frobnicate' (choose from 'login',")

