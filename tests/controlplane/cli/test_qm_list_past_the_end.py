"""`qm list --offset N` past the last job said "No jobs pending or running (use --all for finished
ones)." of a list that had jobs: it now says how many the list has and the last page's offset."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_an_offset_past_the_end_says_how_many_there_are(alice_qm) -> None:
    for name in ("a", "b", "c"):
        assert alice_qm("submit", "--name", name, "--gpus", "1", "--hold").code == 0

    r = alice_qm("list", "--offset", "10", "--limit", "2")

    assert r.code == 0, r.err
    assert r.out == "No jobs from --offset 10: the list has 3 jobs (--offset 1 for the last page).\n"
    assert alice_qm("list", "--offset", "2", "--limit", "2").out.splitlines()[-1] == "(3–3 of 3)"
    assert alice_qm("list", "--name", "nothing-named-so").out == (
        "No jobs pending or running (use --all for finished ones).\n")
