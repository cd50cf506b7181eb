"""`qm submit --array 0-5%2`, `qm update ARRAY_ID --array-limit N|none`, and the limit in
`qm status` and `qm list --array`, against a live server."""

from __future__ import annotations

from controlplane.choices import EventKind
from controlplane.models import Event, Job


def _limits(array_id: str) -> set[int | None]:
    return set(Job.objects.filter(array_id=array_id).values_list("array_task_limit", flat=True))


def test_submit_with_a_limit_then_raise_it_lift_it_and_see_it(alice_qm, fleet) -> None:
    run = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-5%2", "--json")
    assert run.code == 0, run.err
    array_id, job_ids = run.json()["array_id"], run.json()["job_ids"]
    assert run.json()["array_task_limit"] == 2 and _limits(array_id) == {2}

    status = alice_qm("status", str(job_ids[1]))
    assert status.code == 0, status.err
    assert f"{array_id}[1], the array runs at most 2 tasks at a time" in status.out

    listed = alice_qm("list", "--array", array_id)
    assert listed.code == 0, listed.err
    assert f"Array {array_id} runs at most 2 tasks at a time." in listed.out

    raised = alice_qm("update", array_id, "--array-limit", "4")
    assert raised.code == 0, raised.err
    assert raised.out == (f"Array {array_id}: array task limit 2 → 4: it runs at most 4 tasks at a time "
                          "(6 tasks changed).\n")
    assert _limits(array_id) == {4}
    assert Event.objects.filter(kind=EventKind.JOB_UPDATED, job__array_id=array_id).count() == 6

    # A task's job id stands for its array; none lifts the limit.
    lifted = alice_qm("update", str(job_ids[0]), "--array-limit", "none")
    assert lifted.code == 0, lifted.err
    assert lifted.out == f"Array {array_id}: array task limit 4 → none: it has no task limit (6 tasks changed).\n"
    assert _limits(array_id) == {None}
    assert "runs at most" not in alice_qm("list", "--array", array_id).out


def test_the_submit_line_says_the_limit(alice_qm, fleet) -> None:
    run = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-3%3")
    assert run.code == 0, run.err
    assert run.out.rstrip().endswith("(team ml), at most 3 at a time."), run.out


def test_refusals_name_the_flag_and_change_nothing(alice_qm, fleet) -> None:
    bad = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-5%0")
    assert bad.code == 1 and "a task limit of 0 would run none of its tasks" in bad.err, bad.err
    assert not Job.objects.exists()

    array_id = alice_qm("submit", "--name", "sweep", "--gpus", "1", "--array", "0-2%1", "--json").json()["array_id"]
    for args, words, code in [  # 2: refused by qm before asking; 1: by the server
        (("--array-limit", "many"), "--array-limit many: a number of tasks", 2),
        (("--array-limit", "20000"), "array_task_limit (--array-limit 20000)", 1),
        (("--array-limit", "2", "--gpus", "2"), "--array-limit changes a whole array: give it alone", 2),
    ]:
        run = alice_qm("update", array_id, *args)
        assert run.code == code and words in run.err, (args, run.err)
    single = alice_qm("submit", "--name", "one", "--gpus", "1", "--json").json()["id"]
    run = alice_qm("update", str(single), "--array-limit", "2")
    assert run.code == 1 and "is not a task of a job array" in run.err, run.err
    assert _limits(array_id) == {1}
