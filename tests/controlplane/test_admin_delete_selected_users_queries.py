"""The users list's "Delete selected users" reads and writes as many queries for many users as
for a few, its confirmation page and the deletion alike, every event still written.

Found 7 Dec by counting queries for 3 users against many: the confirmation page counted each
user's jobs and maintenance windows in two queries per user (the consequences it lists), and the
deletion recorded each user on their own (their groups and permissions read, then their
`UserDeleted`, memberships, hooks, jobs and windows each read and written): a dozen queries per
user, on a page an admin uses to clean up a departed cohort of dozens. A single user's deletion
with thousands of jobs was already constant (test_user_deletion_job_events.py); now the
selection is too: each kind of record is read once for all the users and every event is written
in one insert.
"""

from __future__ import annotations

import html
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.choices import JobHold
from controlplane.models import Event
from controlplane.services import maintenance, notifications
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _users_with_everything(fleet, prefix: str, count: int, first_hour: int) -> list[Any]:  # type: ignore[no-untyped-def]
    """Users each with every record their deletion deletes, empties or records: a role, a group
    and a permission, two API tokens, a notification hook, jobs submitted and held, a
    maintenance window created and one cancelled."""
    ops = Group.objects.get_or_create(name="ops")[0]
    change_quota = Permission.objects.get(codename="change_quota")
    users = []
    for i in range(count):
        user = f.make_user(f"{prefix}{i}", team=fleet.ml, superuser=True)
        user.groups.add(ops)
        user.user_permissions.add(change_quota)
        f.token_for(user)
        f.token_for(user)
        notifications.create_hook(user, url="https://hooks.example.com/qm", events=["job.finished"], team=None,
                                  actor=f"user:{user.get_username()}")
        f.finished_jobs_of(user, fleet.ml, 2)
        f.make_job(fleet.ml, submitter=fleet.users["owner"], hold=JobHold.ADMIN, held_by=user, held_at=timezone.now())
        start = timezone.now() + timedelta(hours=first_hour + 4 * i)
        maintenance.create(user, nodes=["h100-0"], start_at=start, duration_s=3600, reason="firmware")
        other = maintenance.create(fleet.users["admin"], nodes=["h100-1"], start_at=start, duration_s=3600,
                                   reason="cables")
        maintenance.cancel(other.pk, user)
        users.append(user)
    return users


def _selected(users: list[Any], **more: str) -> dict[str, Any]:
    return {"action": "delete_selected", "_selected_action": [u.pk for u in users], **more}


def _whose(event: Event) -> str | None:
    """The deleted user an event records something of (a job's, window's, token's, role's, hook's)."""
    return event.data.get("user") or (event.data.get("before") or {}).get("user")


def _text(response: Any) -> str:
    assert response.status_code == 200
    return " ".join(html.unescape(response.content.decode()).split())


def _sql(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"][:160] for q in queries.captured_queries]


@pytest.fixture
def few_and_many(fleet, boss) -> tuple[list[Any], list[Any]]:  # type: ignore[no-untyped-def]
    few = _users_with_everything(fleet, "few", 3, first_hour=2)
    many = _users_with_everything(fleet, "many", 9, first_hour=100)
    boss.get("/admin/auth/user/")  # the session read once
    ContentType.objects.get_for_model(get_user_model())  # and the users' content type (the admin's log), cached
    return few, many


def test_the_confirmation_of_delete_selected_users_reads_as_many_queries_for_many_users_as_for_a_few(
        boss, few_and_many) -> None:
    few, many = few_and_many

    with CaptureQueriesContext(connection) as for_few:
        page = _text(boss.post("/admin/auth/user/", _selected(few)))
    assert "few0 submitted 2 jobs" in page and "few2's 2 API tokens are deleted with the account" in page
    assert "few1 in ml as member" in page  # Django's own list, each role named by its team
    with CaptureQueriesContext(connection) as for_many:
        page = _text(boss.post("/admin/auth/user/", _selected(many)))
    assert "many8 submitted 2 jobs" in page and "many8's 2 API tokens are deleted with the account" in page

    assert len(for_many.captured_queries) == len(for_few.captured_queries), _sql(for_many)


def test_delete_selected_users_deletes_in_as_many_queries_for_many_users_as_for_a_few(boss, few_and_many) -> None:
    few, many = few_and_many

    with CaptureQueriesContext(connection) as for_few:
        assert boss.post("/admin/auth/user/", _selected(few, post="yes")).status_code == 302
    with CaptureQueriesContext(connection) as for_many:
        assert boss.post("/admin/auth/user/", _selected(many, post="yes")).status_code == 302

    assert len(for_many.captured_queries) == len(for_few.captured_queries), _sql(for_many)
    assert not get_user_model().objects.filter(pk__in=[u.pk for u in few + many]).exists()
    assert Event.objects.filter(reason="UserDeleted", actor="user:boss").count() == 12


def test_delete_selected_users_still_records_every_event_of_each_user(fleet, boss) -> None:
    users = _users_with_everything(fleet, "gone", 4, first_hour=2)

    assert boss.post("/admin/auth/user/", _selected(users, post="yes")).status_code == 302

    recorded = Event.objects.filter(actor="user:boss")
    for reason, each in (("MembershipDeleted", 1), ("NotificationHookDeleted", 1), ("ApiTokenOwnerDeleted", 2),
                         ("SubmitterDeleted", 2), ("HolderDeleted", 1), ("MaintenanceWindowChanged", 2)):
        assert sorted(_whose(e) for e in recorded.filter(reason=reason)) == sorted(
            u.get_username() for u in users for _ in range(each)), reason
    for user in users:
        name = user.get_username()
        [deleted] = recorded.filter(reason="UserDeleted", data__before__username=name)
        assert deleted.data["before"]["groups"] == ["ops"]
        assert deleted.data["before"]["user_permissions"] == ["controlplane.change_quota"]
        assert deleted.message == f"User {name} deleted"
        # each user's events together, the user's own first, as one user's deletion writes them
        own = [e.pk for e in recorded.order_by("id") if e.pk == deleted.pk or _whose(e) == name]
        assert own[0] == deleted.pk and own == list(range(own[0], own[0] + len(own))), name
