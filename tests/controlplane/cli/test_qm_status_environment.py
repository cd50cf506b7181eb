"""`qm status JOB` says the environment the job was submitted with, as the job page's Shape
panel does (Environment: A=1 B=two words); it said its command alone, so `qm submit -e` could
not be checked from the CLI. Each NAME=value as a shell would read it back (a value with a space
quoted); none: no line."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.slow


def test_status_says_the_jobs_environment_as_the_page(alice_qm, fleet) -> None:
    run = alice_qm("submit", "-G", "1", "--hold", "--parsable", "-e", "WANDB_PROJECT=sweeps",
                   "-e", "NOTE=two words", "--", "python", "train.py")
    assert run.code == 0, run.err

    status = alice_qm("status", run.out.strip())

    assert status.code == 0, status.err
    assert re.search(r"^environment: +NOTE='two words' WANDB_PROJECT=sweeps$", status.out, re.M), status.out


def test_a_job_without_environment_has_no_line(alice_qm, fleet) -> None:
    run = alice_qm("submit", "-G", "1", "--hold", "--parsable", "--", "true")

    status = alice_qm("status", run.out.strip())

    assert status.code == 0 and "environment:" not in status.out
