"""qm says a runtime limit as the change sentences, the events and the job page say it
(span_text.span_words: `1 h 30 min`): `qm submit` said `limit 1h30m`, `qm status` `1h30m`
and `qm sprio`'s LIMIT `1h30m` beside an update that said `1 h 30 min → 2 h`."""

from __future__ import annotations

import re

import pytest

from controlplane.models import Job

pytestmark = pytest.mark.slow


def test_submit_status_and_sprio_say_the_runtime_limit_as_the_change_sentence(alice_qm, fleet) -> None:
    submitted = alice_qm("submit", "--gpus", "2", "--time", "90m", "--", "python", "train.py")
    assert submitted.code == 0, submitted.err
    assert "limit 1 h 30 min," in submitted.out, submitted.out
    job = Job.objects.latest("pk")

    status = alice_qm("status", str(job.pk))
    sprio = alice_qm("sprio", "--wide")
    changed = alice_qm("update", str(job.pk), "--time", "2h")

    assert re.search(r"^runtime limit:\s+1 h 30 min$", status.out, re.M), status.out
    row = next(line for line in sprio.out.splitlines() if re.match(rf"\s*\S+\s+{job.pk}\s", line))
    assert row.rstrip().endswith("1 h 30 min"), sprio.out
    assert "runtime limit 1 h 30 min → 2 h" in changed.out, changed.out
