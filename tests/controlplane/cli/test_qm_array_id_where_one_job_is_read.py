"""A job array's id given to a command that reads or changes one job (`qm status <uuid>`,
`qm explain`, `qm events`, `qm logs`, `qm runs`, `qm sprio`, `qm update … --time`) is said to be
an array's, with the command that lists its tasks and their job ids. `qm submit --array` prints
that id and nothing else, so it is the id a researcher has at hand; these commands answered
"'<uuid>' is not a job id (a number, as `qm list` shows)", as if it were a typo, while `qm
cancel <uuid>` already named it an array's (demo walk, 6 Dec)."""

from __future__ import annotations

import pytest

from controlplane.choices import JobState
from controlplane.models import Job

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("command", [
    ("status",), ("explain",), ("events",), ("logs",), ("runs",), ("sprio",),
])
def test_an_array_id_where_one_job_is_read_points_to_its_tasks(alice_qm, fleet, live_server, command) -> None:
    assert alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-3", "--hold").code == 0
    array_id = str(Job.objects.filter(name="sweep").first().array_id)

    run = alice_qm(*command, array_id)

    assert run.code != 0
    assert "is not a job id" not in run.err, run.err
    assert f"'{array_id}' is a job array's id, not a job's: qm list --array {array_id} lists its tasks" in run.err, \
        run.err


def test_an_array_id_given_to_update_says_what_changes_a_whole_array(alice_qm, fleet, live_server) -> None:
    assert alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-3", "--hold", "--time", "1h").code == 0
    array_id = str(Job.objects.filter(name="sweep").first().array_id)

    run = alice_qm("update", array_id, "--time", "30m")

    assert run.code != 0
    assert f"'{array_id}' is a job array's id, not a job's" in run.err, run.err
    assert f"qm update {array_id} --array-limit N" in run.err and f"qm list --array {array_id}" in run.err, run.err
    assert set(Job.objects.filter(array_id=array_id).values_list("runtime_limit_s", flat=True)) == {3600}
    assert set(Job.objects.filter(array_id=array_id).values_list("state", flat=True)) == {JobState.PENDING}


def test_a_word_that_is_no_id_at_all_is_still_not_a_job_id(alice_qm, fleet, live_server) -> None:
    run = alice_qm("status", "sweep")
    assert run.code != 0
    assert "'sweep' is not a job id (a number, as `qm list` shows)" in run.err, run.err
