"""`qm events` at an 80-column terminal: a job's events were printed as wide as their longest
sentence (130 columns and more: every row wrapped from the terminal's left edge, no column lined
up), and the fleet's cut each sentence to 17 columns (`Submitted by ali… 10 min`), which said
nothing. The narrow view now leaves to --wide what the sentence already says (a job's BY; the
fleet's NODE, TEAM and BY) and wraps each sentence between words under its WHAT column, so a
researcher reads the whole of what happened and every line fits; `--follow` prints the same."""

from __future__ import annotations

import re

import pytest

from controlplane.cli import output, terminal_width
from controlplane.models import Job

pytestmark = pytest.mark.slow

AT_80 = {"COLUMNS": "80"}
WHY = "waiting for the tokenizer fix from the data team before evaluating on the held-out set"


def _headers(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def _said(text: str) -> str:
    """The table's words as one line of text, however it was wrapped."""
    return " ".join(text.split())


def _held_job(qm) -> Job:  # noqa: ANN001
    done = qm("submit", "--name", "eval", "--gpus", "1", "--hold", "--hold-reason", WHY, "--", "python", "eval.py")
    assert done.code == 0, done.err
    return Job.objects.get(name="eval")


def test_a_jobs_events_fit_80_columns_with_every_sentence_whole(alice_qm) -> None:  # noqa: ANN001
    job = _held_job(alice_qm)

    narrow = alice_qm("events", str(job.pk), extra_env=AT_80)
    wide = alice_qm("events", str(job.pk), "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    assert max(len(line) for line in narrow.out.splitlines()) <= 80, narrow.out
    assert _headers(narrow.out.splitlines()[0]) == ["TIME (UTC)", "EVENT", "WHAT"], narrow.out
    assert f"held by alice ({WHY}) until released" in _said(narrow.out), narrow.out
    assert "cut to fit" not in narrow.err
    assert _headers(wide.out.splitlines()[0]) == ["TIME (UTC)", "EVENT", "BY", "WHAT"]
    assert f"held by alice ({WHY}) until released" in wide.out  # on its one line


def test_a_jobs_followed_events_fit_80_columns_too(alice_qm) -> None:  # noqa: ANN001
    job = _held_job(alice_qm)
    assert alice_qm("cancel", str(job.pk)).code == 0

    followed = alice_qm("events", str(job.pk), "--follow", extra_env=AT_80)

    assert followed.code == 0, followed.err
    assert max(len(line) for line in followed.out.splitlines()) <= 80, followed.out
    assert _headers(followed.out.splitlines()[0]) == ["TIME (UTC)", "EVENT", "WHAT"], followed.out
    assert f"held by alice ({WHY}) until released" in _said(followed.out), followed.out


def test_the_fleets_events_say_each_sentence_whole_at_80_columns(alice_qm) -> None:  # noqa: ANN001
    job = _held_job(alice_qm)

    narrow = alice_qm("events", extra_env=AT_80)
    wide = alice_qm("events", "--wide", extra_env=AT_80)

    assert narrow.code == 0 and wide.code == 0, narrow.err + wide.err
    assert max(len(line) for line in narrow.out.splitlines()) <= 80, narrow.out
    assert _headers(narrow.out.splitlines()[0]) == ["TIME (UTC)", "EVENT", "JOB", "WHAT"], narrow.out
    row = next(line for line in narrow.out.splitlines() if "job.submitted" in line)
    assert re.search(rf"\s{job.pk}\s+Submitted by alice", row), narrow.out
    assert f"held by alice ({WHY}) until released" in _said(narrow.out), narrow.out
    assert "cut to fit" not in narrow.err
    assert _headers(wide.out.splitlines()[0]) == ["TIME (UTC)", "EVENT", "JOB", "NODE", "TEAM", "BY", "WHAT"]


def test_a_sentence_wraps_between_words_and_a_word_too_long_within_itself() -> None:
    assert terminal_width.wrapped("Bound to 4 GPUs (a100-04:4,5,6,7), generation 44", 20, output.width) == [
        "Bound to 4 GPUs", "(a100-04:4,5,6,7),", "generation 44"]
    assert terminal_width.wrapped("see https://example.org/a/very/long/path/to/the/log", 12, output.width) == [
        "see", "https://exam", "ple.org/a/ve", "ry/long/path", "/to/the/log"]
    assert terminal_width.wrapped("", 12, output.width) == [""]
