"""An array hold with a reason follows the single job's rule (services/holds._again) on each
task already held: held by the same kind of holder, the task keeps its hold (who, since when)
and takes the new reason, said at once in its Held sentence (naming its own holder) and
recorded as a job.held event worded as the single job's; an admin's hold stays under a member's
array hold; the same reason, or none, changes nothing. In a fixed number of statements."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from controlplane.choices import EventKind, JobHold
from controlplane.models import Event, Job
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
J = "/api/v1/jobs/"
A = "/api/v1/job-arrays/"
NEW = "waiting for dataset v4"


def _sentence(label: str, reason: str) -> str:
    return f"Held by {label}: {reason} — until it is released it is not in the queue and holds nothing."


def _last_held(job: Job) -> Event:
    return Event.objects.filter(job=job, kind=EventKind.JOB_HELD).order_by("id").last()


def test_an_array_hold_with_another_reason_rewords_the_tasks_held_by_the_same_kind_of_holder(
        fleet, alice, admin) -> None:
    carol = f.make_user("carol", team=fleet.ml)
    array_id = str(uuid.uuid4())
    mine, carols, admins, free = (f.make_job(fleet.ml, name="sweep", array_id=array_id, array_index=i)
                                  for i in range(4))
    alice.post(f"{J}{mine.pk}/hold/", {"reason": "quota review"}, format="json")
    as_carol = APIClient()
    as_carol.force_authenticate(carol)
    assert as_carol.post(f"{J}{carols.pk}/hold/", {}, format="json").status_code == 200
    admin.post(f"{J}{admins.pk}/hold/", {"reason": "maintenance"}, format="json")
    before = {j.pk: j.held_at for j in Job.objects.filter(array_id=array_id)}

    r = alice.post(f"{A}{array_id}/hold/", {"reason": NEW}, format="json")

    assert r.status_code == 200, r.content[:400]
    body = r.json()
    assert body["changed"] == [mine.pk, carols.pk, free.pk]
    assert body["reworded"] == [mine.pk, carols.pk] and body["unchanged"] == 1
    assert body["detail"] == (f"Array {array_id} (sweep, 4 tasks): 1 held, 2 held already with their reason "
                              "changed, 1 held already.")
    rows = {pk: (hold, holder, held_at, reason, words) for pk, hold, holder, held_at, reason, words in
            Job.objects.filter(array_id=array_id).values_list("pk", "hold", "held_by__username", "held_at",
                                                              "hold_reason", "pending_words")}
    # Reworded: the same hold (who, since when), the new reason, its own holder's sentence.
    assert rows[mine.pk] == (JobHold.USER, "alice", before[mine.pk], NEW, _sentence("alice", NEW))
    assert rows[carols.pk] == (JobHold.USER, "carol", before[carols.pk], NEW, _sentence("carol", NEW))
    # A member's array hold leaves an admin's hold and its reason alone; a free task is held.
    assert rows[admins.pk] == (JobHold.ADMIN, "root", before[admins.pk], "maintenance",
                               _sentence("admin root", "maintenance"))
    assert rows[free.pk][:2] == (JobHold.USER, "alice") and rows[free.pk][3:] == (NEW, _sentence("alice", NEW))

    # Each reworded task's event says what the single job's says (services/holds._reworded).
    since = f"{before[mine.pk]:%Y-%m-%d %H:%M:%S} UTC"
    event = _last_held(mine)
    assert event.message == f"Hold reason changed by alice: {NEW} (was: quota review); held by alice since {since}"
    assert event.data == {"hold": "user", "held_by": "alice", "reason": NEW, "was_reason": "quota review"}
    event = _last_held(carols)
    assert event.message == (f"Hold reason changed by alice: {NEW}; held by carol since "
                             f"{before[carols.pk]:%Y-%m-%d %H:%M:%S} UTC")
    assert event.data == {"hold": "user", "held_by": "carol", "reason": NEW}
    assert Event.objects.filter(job=admins, kind=EventKind.JOB_HELD).count() == 1
    held_events = Event.objects.filter(job__array_id=array_id, kind=EventKind.JOB_HELD).count()

    # The same reason again, or none: nothing changes, nothing is recorded.
    for again in ({"reason": NEW}, {}):
        body = alice.post(f"{A}{array_id}/hold/", again, format="json").json()
        assert body["changed"] == [] and body["reworded"] == [] and body["unchanged"] == 4
    assert Event.objects.filter(job__array_id=array_id, kind=EventKind.JOB_HELD).count() == held_events

    # An admin's array hold: the admin's hold takes the new reason, the users' holds are replaced.
    body = admin.post(f"{A}{array_id}/hold/", {"reason": "maintenance window"}, format="json").json()
    assert body["reworded"] == [admins.pk] and sorted(body["changed"]) == sorted([mine.pk, carols.pk, admins.pk,
                                                                                   free.pk])
    assert set(Job.objects.filter(array_id=array_id).values_list("hold", "held_by__username", "hold_reason")) == {
        (JobHold.ADMIN, "root", "maintenance window")}
    assert Job.objects.get(pk=admins.pk).held_at == before[admins.pk]
    assert _last_held(admins).message.startswith(
        "Hold reason changed by root: maintenance window (was: maintenance); held by admin root since ")
    assert _last_held(mine).message == ("Held by admin root (was held by alice): maintenance window — out of the "
                                        "queue until released")


def test_the_single_job_and_the_array_say_a_reworded_hold_alike(fleet, alice) -> None:
    array_id = str(uuid.uuid4())
    single = f.make_job(fleet.ml, name="one")
    task = f.make_job(fleet.ml, name="sweep", array_id=array_id, array_index=0)
    for job in (single, task):
        alice.post(f"{J}{job.pk}/hold/", {"reason": "quota review"}, format="json")
    Job.objects.filter(pk__in=[single.pk, task.pk]).update(held_at=timezone.now().replace(microsecond=0))

    alice.post(f"{J}{single.pk}/hold/", {"reason": NEW}, format="json")
    alice.post(f"{A}{array_id}/hold/", {"reason": NEW}, format="json")

    one, other = _last_held(single), _last_held(task)
    assert (one.message, one.data, one.reason) == (other.message, other.data, other.reason)
    assert set(Job.objects.filter(pk__in=[single.pk, task.pk]).values_list(
        "hold_reason", "pending_words", "would_start_if_words")) == {(NEW, _sentence("alice", NEW), "it is released")}


def _held_array(fleet, size: int) -> str:
    """An array of `size` tasks, every one held by alice or (one in three) by bob's user hold."""
    bob = f.make_user("bob-" + uuid.uuid4().hex[:6], team=fleet.ml)
    alice = fleet.users["owner"]
    array_id = str(uuid.uuid4())
    now = timezone.now()
    Job.objects.bulk_create(
        Job(team=fleet.ml, priority_class=fleet.research, name="wide", gpus=1, runtime_limit_s=3600,
            submitted_at=now, state_changed_at=now, array_id=array_id, array_index=i, hold=JobHold.USER,
            held_at=now, held_by=bob if i % 3 == 0 else alice, hold_reason="quota review", pending_code="Held")
        for i in range(size))
    return array_id


def test_rewording_an_arrays_holds_takes_the_same_statements_whatever_its_size(fleet, alice) -> None:
    counts = []
    for size in (3, 300):
        array_id = _held_array(fleet, size)
        with CaptureQueriesContext(connection) as queries:
            r = alice.post(f"{A}{array_id}/hold/", {"reason": NEW}, format="json")
        assert r.status_code == 200 and len(r.json()["reworded"]) == size, r.content[:400]
        counts.append(len(queries))
        assert Event.objects.filter(job__array_id=array_id, kind=EventKind.JOB_HELD).count() == size
        words = set(Job.objects.filter(array_id=array_id).values_list("hold_reason", "pending_words"))
        assert {reason for reason, _ in words} == {NEW}
        assert {text for _, text in words} == {_sentence("alice", NEW), *(
            _sentence(name, NEW) for name in Job.objects.filter(array_id=array_id).exclude(
                held_by__username="alice").values_list("held_by__username", flat=True))}
    assert counts[0] == counts[1] <= 16, counts
