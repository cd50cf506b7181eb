"""A job array's task limit (Slurm's `--array=0-99%10`, `scontrol update ArrayTaskThrottle=N`):
written on every task at submit, from the array's text or `array_task_limit`; refused naming the
field when it cannot be; changed later with `PATCH job-arrays/{array_id}/` by the array's team or
an admin, every task at once with one job.updated event each; shown in the job's representation."""

from __future__ import annotations

import uuid
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import EventKind, JobState
from controlplane.models import Event, Job, SchedulerLease
from controlplane.services import access, array_limit, holds
from controlplane.services.jobs import parse_array_limit
from controlplane.services.snapshot import read_snapshot
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import bind

pytestmark = pytest.mark.django_db
ARRAYS = "/api/v1/job-arrays/"
JOBS = "/api/v1/jobs/"


def _submit(client, **fields):  # noqa: ANN001, ANN202
    return client.post(ARRAYS, {"name": "sweep", "gpus": 1, "command": "python sweep.py", **fields}, format="json")


def _limits(array_id: str) -> list[int | None]:
    return list(Job.objects.filter(array_id=array_id).order_by("array_index").values_list("array_task_limit",
                                                                                           flat=True))


# ------------------------------------------------------------------------------------- submit


@pytest.mark.parametrize("fields", [{"array": "0-5%2"}, {"array": "0-5", "array_task_limit": 2},
                                    {"array": "0-5%2", "array_task_limit": 2}, {"array": "0-5 % 2"}])
def test_the_limit_is_written_on_every_task_from_the_text_or_the_field(fleet, alice, fields) -> None:
    r = _submit(alice, **fields)

    assert r.status_code == 201, r.json()
    body = r.json()
    assert body["count"] == 6 and body["indices"] == [0, 1, 2, 3, 4, 5]
    assert body["array_task_limit"] == 2
    assert _limits(body["array_id"]) == [2] * 6
    # Its submit event says it; the job's representation carries it.
    first = Event.objects.filter(job_id=body["job_ids"][0], kind=EventKind.JOB_SUBMITTED).get()
    assert "at most 2 tasks of its array at a time" in first.message
    job = alice.get(f"{JOBS}{body['job_ids'][3]}/").json()
    assert job["array_task_limit"] == 2 and job["array_index"] == 3
    assert alice.get(f"{ARRAYS}{body['array_id']}/").json()["array_task_limit"] == 2


def test_an_array_without_a_limit_has_none(fleet, alice) -> None:
    r = _submit(alice, array="0-2")

    assert r.status_code == 201 and r.json()["array_task_limit"] is None
    assert _limits(r.json()["array_id"]) == [None] * 3
    assert alice.get(f"{JOBS}{r.json()['job_ids'][0]}/").json()["array_task_limit"] is None


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"array": "0-9%0"}, "array", "a task limit of 0 would run none of its tasks"),
    ({"array": "0-9%x"}, "array", "'%x' is not a task limit"),
    ({"array": "0-9%"}, "array", "'%' is not a task limit"),
    ({"array": "0-9%-1"}, "array", "'%-1' is not a task limit"),
    ({"array": "0-9%2%3"}, "array", "'%2%3' is not a task limit"),
    ({"array": "0-9%²"}, "array", "'%²' is not a task limit"),
    ({"array": "0-9%10001"}, "array", "a task limit is at most 10000"),
    ({"array": "0-9", "array_task_limit": 0}, "array_task_limit", "at least 1 task holding GPUs at once"),
    ({"array": "0-9", "array_task_limit": "ten"}, "array_task_limit", "is not a whole number"),
    ({"array": "0-9%3", "array_task_limit": 4}, "array_task_limit", "4 disagrees with the array's %3"),
])
def test_a_bad_limit_is_a_400_naming_its_field_and_nothing_is_written(fleet, alice, fields, field, words) -> None:
    r = _submit(alice, **fields)

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == [field], r.json()
    assert words in r.json()["errors"][field][0], r.json()
    assert not Job.objects.exists()


def test_a_limit_without_an_array_is_a_400(fleet, alice) -> None:
    r = alice.post(JOBS, {"name": "one", "gpus": 1, "array_task_limit": 2}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["array_task_limit"]
    assert "a task limit is for a job array" in r.json()["errors"]["array_task_limit"][0]
    assert not Job.objects.exists()


def test_parse_array_limit_splits_the_text() -> None:
    assert parse_array_limit("0-99%10") == ("0-99", 10)
    assert parse_array_limit("1,3,10-20") == ("1,3,10-20", None)
    with pytest.raises(ValueError, match="would run none"):
        parse_array_limit("0-9%00")


# -------------------------------------------------------------------------------------- PATCH


def _array(client, spec: str = "0-3%2") -> dict:  # noqa: ANN001
    r = _submit(client, array=spec)
    assert r.status_code == 201, r.json()
    return r.json()


def test_the_owner_raises_the_limit_on_every_task_with_an_event_each(fleet, alice) -> None:
    array = _array(alice)
    Job.objects.filter(pk=array["job_ids"][0]).update(state=JobState.SUCCEEDED, finished_at=timezone.now())

    r = alice.patch(f"{ARRAYS}{array['array_id']}/", {"array_task_limit": 4}, format="json")

    assert r.status_code == 200, r.json()
    body = r.json()
    assert body["array_task_limit"] == 4 and body["was"] == 2 and body["changed"] is True
    # said for people, as a job's change is (services/holds.change_words): not the API's name
    assert body["detail"] == (f"Array {array['array_id']}: array task limit 2 → 4: it runs at most 4 tasks at a "
                              "time (4 tasks changed).")
    assert _limits(array["array_id"]) == [4] * 4
    events = Event.objects.filter(kind=EventKind.JOB_UPDATED, job__array_id=array["array_id"]).order_by("job_id")
    assert [e.job_id for e in events] == array["job_ids"]
    assert {e.actor for e in events} == {"user:alice"}
    assert events[1].data["changes"] == {"array_task_limit": [2, 4]}
    assert events[0].data["state"] == "succeeded" and events[1].data["state"] == "pending"
    assert events[1].message == ("Changed by alice for its whole array: array task limit 2 → 4 "
                                 "(at most 4 tasks at a time)")

    # The same again changes nothing and records nothing.
    again = alice.patch(f"{ARRAYS}{array['array_id']}/", {"array_task_limit": 4}, format="json")
    assert again.status_code == 200 and again.json()["changed"] is False
    assert "already runs at most 4 tasks at a time: nothing changed" in again.json()["detail"]
    assert Event.objects.filter(kind=EventKind.JOB_UPDATED).count() == 4


def test_null_lifts_the_limit_and_an_admin_may_set_it(fleet, alice, admin) -> None:
    array = _array(alice)

    lifted = alice.patch(f"{ARRAYS}{array['array_id']}/", {"array_task_limit": None}, format="json")
    assert lifted.status_code == 200 and lifted.json()["array_task_limit"] is None, lifted.json()
    assert _limits(array["array_id"]) == [None] * 4
    assert Event.objects.filter(kind=EventKind.JOB_UPDATED).first().data["changes"] == {
        "array_task_limit": [2, None]}

    by_admin = admin.patch(f"{ARRAYS}{array['array_id']}/", {"array_task_limit": 1}, format="json")
    assert by_admin.status_code == 200, by_admin.json()
    assert _limits(array["array_id"]) == [1] * 4
    assert Event.objects.filter(kind=EventKind.JOB_UPDATED, actor="user:root").count() == 4


def test_another_team_cannot_see_it_and_finance_cannot_either(fleet, alice, clients) -> None:
    array = _array(alice)

    # bob (vision) sees no ml job: a 404, as for holding another team's array; finance submits
    # nothing and is refused by the endpoint's permission.
    r = clients["other_team"].patch(f"{ARRAYS}{array['array_id']}/", {"array_task_limit": 4}, format="json")
    assert r.status_code == 404
    r = clients["finance"].patch(f"{ARRAYS}{array['array_id']}/", {"array_task_limit": 4}, format="json")
    assert r.status_code in (403, 404), r.content
    assert clients["anonymous"].patch(f"{ARRAYS}{array['array_id']}/", {"array_task_limit": 4},
                                      format="json").status_code == 401
    assert _limits(array["array_id"]) == [2] * 4
    assert not Event.objects.filter(kind=EventKind.JOB_UPDATED).exists()


def test_a_member_who_sees_but_may_not_submit_for_the_team_is_refused(fleet, alice) -> None:
    """Visible is not enough: the rule is holds.hold_array's, the team's submitters and admins."""
    array = _array(alice)
    viewer = f.make_user("vera")

    with mock.patch.object(access, "visible_jobs", lambda user: Job.objects.all()):
        with pytest.raises(holds.Refused) as refused:
            array_limit.set_task_limit(viewer, array["array_id"], 4)
    assert refused.value.status == 403
    assert "belongs to another team" in refused.value.detail
    assert _limits(array["array_id"]) == [2] * 4


@pytest.mark.parametrize(("body", "field"), [
    ({"array_task_limit": 0}, "array_task_limit"),
    ({"array_task_limit": -3}, "array_task_limit"),
    ({"array_task_limit": "many"}, "array_task_limit"),
    ({"array_task_limit": 10_001}, "array_task_limit"),
    ({}, "array_task_limit"),
    ({"array_task_limit": 3, "gpus": 2}, "gpus"),
])
def test_bad_values_are_a_400_naming_the_field(fleet, alice, body, field) -> None:
    array = _array(alice)

    r = alice.patch(f"{ARRAYS}{array['array_id']}/", body, format="json")

    assert r.status_code == 400, r.json()
    assert field in r.json()["errors"], r.json()
    assert _limits(array["array_id"]) == [2] * 4


def test_an_unknown_array_is_a_404(fleet, alice) -> None:
    r = alice.patch(f"{ARRAYS}{uuid.uuid4()}/", {"array_task_limit": 3}, format="json")
    assert r.status_code == 404


def test_patch_of_one_task_names_the_arrays_endpoint(fleet, alice) -> None:
    array = _array(alice)

    r = alice.patch(f"{JOBS}{array['job_ids'][0]}/", {"array_task_limit": 3}, format="json")

    assert r.status_code == 400
    assert "PATCH job-arrays/{array_id}/" in r.json()["errors"]["array_task_limit"][0]


def test_the_change_is_one_update_of_the_tasks_whatever_their_number(fleet, alice) -> None:
    small, big = _array(alice, "0-2%1"), _array(alice, "0-59%1")
    user = get_user_model().objects.get(username="alice")
    array_limit.set_task_limit(user, small["array_id"], 4)  # the user's memberships read once, and kept
    counts = []
    for array in (small, big):
        with CaptureQueriesContext(connection) as queries:
            array_limit.set_task_limit(user, array["array_id"], 5)
        updates = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
        assert len(updates) == 1, updates
        counts.append(len(queries.captured_queries))
    assert counts[0] == counts[1], counts


# ----------------------------------------------------------------------------------- snapshot


def test_the_snapshot_carries_the_array_and_its_limit_for_pending_and_running_tasks(fleet, alice) -> None:
    array = _array(alice, "0-2%2")
    single = alice.post(JOBS, {"name": "one", "gpus": 1}, format="json").json()
    running = Job.objects.get(pk=array["job_ids"][0])
    SchedulerLease.objects.create(epoch=1)
    bind(running, {fleet.nodes[1]: [0]})

    context = read_snapshot(timezone.now(), epoch=1)

    pending = {spec.id: spec for spec in context.snapshot.pending}
    [run] = [r for r in context.snapshot.running if r.spec.id == str(running.pk)]
    assert (run.spec.array_id, run.spec.array_task_limit) == (array["array_id"], 2)
    for pk in array["job_ids"][1:]:
        assert (pending[str(pk)].array_id, pending[str(pk)].array_task_limit) == (array["array_id"], 2)
    assert (pending[str(single["id"])].array_id, pending[str(single["id"])].array_task_limit) == ("", None)
