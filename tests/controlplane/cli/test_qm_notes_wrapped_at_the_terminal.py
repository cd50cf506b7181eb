"""A sentence qm prints under a table (or in its place) is wrapped between words at the
terminal's width, as the tables are fitted to it: until 7 Dec sinfo's AWAY/STRANDED note was
175 columns, sshare's SHARE note 208, sprio's first line 197 and `qm maint list`'s "none" line
169, and the warning on stderr that no scheduling cycle has run 86, so an 80-column terminal
broke them mid-word. One home (output.note) wraps them all; a pipe
or file without COLUMNS gets each whole on its line, as a script reads it."""

from __future__ import annotations

import pytest

from tests.controlplane import factories as f

pytestmark = pytest.mark.slow

AT_80 = {"COLUMNS": "80"}


def _words_alike(narrow: str, whole: str) -> None:
    """Every line fits 80 columns, and the text says the same words in the same order."""
    assert max(len(line) for line in narrow.splitlines()) <= 80, narrow
    assert narrow.split() == whole.split(), (narrow, whole)


def _note(out: str, start: str) -> str:
    """From the line that starts with `start` to the end of the output."""
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    return "\n".join(lines[first:])


@pytest.mark.parametrize(("command", "start"), [(("sinfo",), "AWAY:"), (("sshare",), "SHARE:")])
def test_the_note_under_a_table_is_wrapped_between_words_at_80_columns(alice_qm, fleet, command, start) -> None:
    narrow = alice_qm(*command, extra_env=AT_80)
    whole = alice_qm(*command, "--wide")

    assert narrow.code == 0 and whole.code == 0, narrow.err + whole.err
    note = _note(narrow.out, start)
    assert len(note.splitlines()) > 1, narrow.out  # it was one line of 175 and 208 columns
    _words_alike(note, _note(whole.out, start))
    assert len(_note(whole.out, start).splitlines()[0]) > 80  # whole on one line for a script


def test_sprios_first_line_is_wrapped_at_80_columns(alice_qm, fleet) -> None:
    f.make_job(fleet.ml, name="sweep-trial-114", submitter=fleet.users["owner"], gpus=2)

    narrow = alice_qm("sprio", extra_env=AT_80)
    piped = alice_qm("sprio")

    assert narrow.code == 0 and piped.code == 0, narrow.err + piped.err
    head = narrow.out.split("\nORDER")[0]
    assert len(head.splitlines()) > 1, narrow.out
    _words_alike(head, piped.out.split("\nORDER")[0])
    # the warning on stderr that no scheduling cycle has run (86 columns) is wrapped alike
    assert "No scheduling cycle has run yet" in narrow.err
    _words_alike(narrow.err, piped.err)


def test_maint_list_with_no_window_says_so_within_80_columns(alice_qm, fleet) -> None:
    narrow = alice_qm("maint", "list", extra_env=AT_80)
    piped = alice_qm("maint", "list")

    assert narrow.code == 0 and piped.code == 0, narrow.err + piped.err
    assert narrow.out.startswith("No maintenance window") and len(narrow.out.splitlines()) > 1, narrow.out
    _words_alike(narrow.out, piped.out)
