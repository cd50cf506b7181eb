"""A count flag given a count that is none (`qm list --limit 0`, `--limit -3`, `--offset -1`,
`qm logs --tail 0`, `--rank -2`) was sent to the server and refused there (exit 1, `error:
Invalid request.`), or refused by qm only after it had read the job. qm now refuses it itself
before any request, as `qm events --limit 0` and `qm sprio --limit 0` are: exit 2, the flag
named with what it takes. No server is asked: QM_URL points at a port nothing listens on."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

NOWHERE = "http://127.0.0.1:9"  # the discard port: a request would fail to connect (exit 1)


@pytest.mark.parametrize(("args", "words"), [
    (["list", "--limit", "0"], "argument --limit: '0' is not a whole number of at least 1 (how many jobs)"),
    (["list", "--limit", "-3"], "argument --limit: '-3' is not a whole number of at least 1 (how many jobs)"),
    (["squeue", "--limit", "0"], "argument --limit: '0' is not a whole number of at least 1 (how many jobs)"),
    (["list", "--offset", "-1"], "argument --offset: '-1' is not a whole number of at least 0 (jobs to skip)"),
    (["list", "--limit", "ten"], "argument --limit: 'ten' is not a whole number of at least 1 (how many jobs)"),
    (["logs", "7", "--tail", "0"], "argument --tail: '0' is not a whole number from 1 to 10000 (the last N lines)"),
    (["logs", "7", "--tail", "10001"],
     "argument --tail: '10001' is not a whole number from 1 to 10000 (the last N lines)"),
    (["logs", "7", "--rank", "-2"], "argument --rank: '-2' is not a whole number of at least 0 (ranks count from 0)"),
    (["runs", "7", "--limit", "0"], "argument --limit: '0' is not a whole number of at least 1 (the latest N runs)"),
    (["events", "--limit", "-1"], "argument --limit/-n: '-1' is not a whole number of at least 1"),
    (["sprio", "--limit", "0"], "argument --limit/-n: '0' is not a whole number of at least 1"),
], ids=lambda value: "_".join(value) if isinstance(value, list) else "")
def test_a_count_that_is_none_is_refused_by_qm_naming_its_flag(qm, args, words) -> None:
    run = qm(*args, url=NOWHERE)

    assert run.code == 2 and run.out == "", run
    assert words in run.err, run.err
    assert "Traceback" not in run.err and "connect" not in run.err.lower()


def test_the_counts_that_are_counts_are_still_taken(alice_qm, fleet) -> None:
    assert alice_qm("list", "--limit", "1", "--offset", "0").code == 0
