"""A job array's id given where a job's goes (`qm cancel <uuid>`, as `scancel` takes an array's id
in place) is said to be an array's, with the command that acts on it; it was "not a job id (a
number, as `qm list` shows)", and `qm submit --array` had printed that very id. Nothing is acted
on either way."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from controlplane.models import Job

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("verb", ["cancel", "hold", "release", "requeue"])
def test_an_array_id_as_a_job_is_pointed_to_the_array_flag(alice_qm, fleet, live_server, verb) -> None:
    assert alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-3", "--hold").code == 0
    array_id = str(Job.objects.filter(name="sweep").first().array_id)

    run = alice_qm(verb, array_id)

    assert run.code != 0
    assert f"'{array_id}' is a job array's id, not a job's: qm {verb} --array {array_id}" in run.err, run.err
    assert set(Job.objects.filter(array_id=array_id).values_list("state", flat=True)) == {JobState.PENDING}


def test_a_word_that_is_no_id_at_all_is_still_not_a_job_id(alice_qm, fleet, live_server) -> None:
    run = alice_qm("cancel", "sweep")
    assert run.code != 0
    assert "'sweep' is not a job id (a number, as `qm list` shows)" in run.err, run.err
