"""Every user created, changed in who they are or what they may do, or deleted is one event,
whatever made the change.

Found 7 Dec: the admin's user pages recorded `UserCreated`, `UserChanged` and `UserDeleted`, and
`manage.py createsuperuser` its superuser, but a user made in `manage.py shell`
(`User.objects.create_user(...)`, `create_superuser`), made a superuser there
(`u.is_superuser = True; u.save()`), or deleted there left nothing in the trail, though each
decides who may sign in and who is an admin of the fleet. Now the user's own save and delete
record it (services/config_audit.py, signals.py), as a password change already was: with no
page or command saying who, the process that made it (`process:<OS user>`); the admin's pages
and createsuperuser still record exactly one event each, naming themselves.
"""

from __future__ import annotations

import getpass
import os
import sys
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.management import call_command
from django.test import Client

from controlplane.choices import EventKind
from controlplane.demo_fleet import seed_demo_fleet
from controlplane.models import Event, Membership, Team
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

SECRET = "a-long-pass-phrase-9"
SAID = "manage.py shell, run as OS user ops: no page or command said who)"


@pytest.fixture
def in_a_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """`manage.py shell -c "…"` run by OS user ops: the command line holds the secret itself."""
    monkeypatch.setattr(sys, "argv", ["/srv/qm/manage.py", "shell", "-c", f"create_user('carol', '{SECRET}')"])
    monkeypatch.setattr(getpass, "getuser", lambda: "ops")


def _user_events(reason: str | None = None) -> list[Event]:
    events = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, data__model="user").order_by("id")
    return list(events.filter(reason=reason) if reason else events)


def _secrets_absent(event: Event, *secrets: str) -> None:
    said = f"{event.message} {event.data} {event.actor}"
    for secret in secrets:
        assert secret not in said


def test_a_user_created_in_a_shell_is_recorded_once_with_the_process_and_no_secret(in_a_shell) -> None:
    carol = get_user_model().objects.create_user("carol", email="carol@example.org", password=SECRET)

    [event] = _user_events()
    pid = os.getpid()
    assert event.reason == "UserCreated" and event.actor == "process:ops"
    assert event.message == f"User carol created (process {pid}, {SAID}"
    assert event.data == {"model": "user", "before": None,
                          "after": {"id": carol.pk, "username": "carol", "is_active": True, "is_staff": False,
                                    "is_superuser": False, "groups": [], "user_permissions": []},
                          "process": "manage.py shell", "os_user": "ops", "pid": pid}
    _secrets_absent(event, SECRET, carol.password, "carol@example.org")


def test_a_superuser_created_in_a_shell_says_it_is_one(in_a_shell) -> None:
    get_user_model().objects.create_superuser("root2", password=SECRET)

    [event] = _user_events()
    assert event.reason == "UserCreated"
    assert event.data["after"]["is_superuser"] is True and event.data["after"]["is_staff"] is True


def test_a_user_made_superuser_in_a_shell_is_recorded(in_a_shell) -> None:
    f.make_user("bob")
    Event.objects.all().delete()
    bob = get_user_model().objects.get(username="bob")

    bob.is_superuser = True
    bob.is_staff = True
    bob.save()

    [event] = _user_events()
    assert event.reason == "UserChanged" and event.actor == "process:ops"
    assert event.message == f"User bob changed: staff no → yes, superuser no → yes (process {os.getpid()}, {SAID}"


def test_a_sign_in_taken_away_in_a_shell_with_update_fields_is_recorded(in_a_shell) -> None:
    f.make_user("bob")
    Event.objects.all().delete()
    bob = get_user_model().objects.get(username="bob")

    bob.is_active = False
    bob.save(update_fields=["is_active"])

    [event] = _user_events()
    assert event.message.startswith("User bob changed: active yes → no (process ")


def test_saves_that_change_nothing_audited_record_nothing(in_a_shell) -> None:
    f.make_user("bob")
    Event.objects.all().delete()
    bob = get_user_model().objects.get(username="bob")

    bob.first_name = "Robert"
    bob.save()
    bob.save()
    assert Client().login(username="bob", password="bob")  # the sign-in writes last_login

    assert _user_events() == []


def test_a_user_deleted_in_a_shell_is_recorded_with_the_memberships_that_went_with_them(in_a_shell) -> None:
    team = Team.objects.create(name="vision")
    bob = f.make_user("bob", team=team)
    Event.objects.all().delete()

    get_user_model().objects.filter(username="bob").delete()  # a queryset's delete too

    [deleted] = _user_events("UserDeleted")
    assert deleted.actor == "process:ops"
    assert deleted.message == f"User bob deleted (process {os.getpid()}, {SAID}"
    assert deleted.data["before"]["id"] == bob.pk
    [membership] = Event.objects.filter(reason="MembershipDeleted")
    assert membership.message == "Membership of bob in vision deleted (user bob deleted)"
    assert not Membership.objects.exists()


def test_createsuperuser_still_records_exactly_one_event_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", SECRET)
    monkeypatch.setattr(getpass, "getuser", lambda: "ops")

    call_command("createsuperuser", interactive=False, username="root2", email="", stdout=StringIO())

    [event] = _user_events()
    assert event.actor == "manage.py:ops"
    assert event.message == "User root2 created (manage.py createsuperuser, run as OS user ops)"
    assert event.data["command"] == "manage.py createsuperuser" and event.data["os_user"] == "ops"


def test_the_demo_seeds_users_in_its_own_name(in_a_shell) -> None:
    seed_demo_fleet(with_nodes=False)

    assert sorted((e.actor, e.message) for e in _user_events()) == [
        ("demo", f"User {name} created") for name in ("admin", "alice", "bob", "finn")]


@pytest.fixture
def boss() -> Client:
    f.make_user("boss", superuser=True)
    client = Client()
    assert client.login(username="boss", password="boss")
    return client


def test_the_admins_add_change_and_delete_still_record_exactly_one_event_each_their_own(boss) -> None:
    form = f.admin_change_form(boss.get("/admin/auth/user/add/"))
    form.update({"username": "carol", "password1": SECRET, "password2": SECRET, "usable_password": "true"})
    Event.objects.all().delete()

    assert boss.post("/admin/auth/user/add/", form).status_code == 302
    carol = get_user_model().objects.get(username="carol")
    path = f"/admin/auth/user/{carol.pk}/change/"
    form = f.opened_admin_form(boss, path)
    form.pop("last_login", None)
    joined = form.pop("date_joined")
    form["date_joined_0"], form["date_joined_1"] = joined.strftime("%Y-%m-%d"), joined.strftime("%H:%M:%S")
    form["is_staff"] = "on"
    assert boss.post(path, form).status_code == 302
    assert boss.post(f"/admin/auth/user/{carol.pk}/delete/", {"post": "yes"}).status_code == 302

    assert [(e.reason, e.actor, e.message) for e in _user_events()] == [
        ("UserCreated", "user:boss", "User carol created"),
        ("UserChanged", "user:boss", "User carol changed: staff no → yes"),
        ("UserDeleted", "user:boss", "User carol deleted"),
    ]


# ----------------------------------------------------------------------------- groups and permissions
# A staff user may change on the admin's pages what their permissions, their own and their
# groups', allow ("Can change quota": every team's quota). Until 7 Dec none of it was recorded,
# on any path: not on the user's page, not on a group's page, not in a shell.


def _quota_editors() -> Group:
    group = Group.objects.create(name="quota-editors")
    group.permissions.add(Permission.objects.get(codename="change_quota"))
    return group


def test_groups_and_a_permission_given_on_the_users_page_are_one_event_with_the_rest(boss) -> None:
    bob = f.make_user("bob")
    editors = _quota_editors()
    Event.objects.all().delete()
    path = f"/admin/auth/user/{bob.pk}/change/"
    form = f.opened_admin_form(boss, path)
    form.pop("last_login", None)
    joined = form.pop("date_joined")
    form["date_joined_0"], form["date_joined_1"] = joined.strftime("%Y-%m-%d"), joined.strftime("%H:%M:%S")
    form.update(is_staff="on", groups=[editors.pk],
                user_permissions=[Permission.objects.get(codename="change_pricerate").pk])

    assert boss.post(path, form).status_code == 302

    [event] = _user_events()
    assert event.actor == "user:boss"
    assert event.message == ("User bob changed: staff no → yes, groups none → quota-editors, "
                             "permissions none → controlplane.change_pricerate"), event.message
    assert event.data["after"]["groups"] == ["quota-editors"]
    assert get_user_model().objects.get(username="bob").has_perm("controlplane.change_quota")


def test_a_group_joined_or_left_in_a_shell_from_either_side_is_recorded(in_a_shell) -> None:
    bob = f.make_user("bob")
    editors = _quota_editors()
    Event.objects.all().delete()

    bob.groups.add(editors)
    editors.user_set.remove(bob)
    bob.user_permissions.set([Permission.objects.get(codename="delete_team")])

    assert [(e.actor, e.message.split(" (process")[0]) for e in _user_events()] == [
        ("process:ops", "User bob changed: groups none → quota-editors"),
        ("process:ops", "User bob changed: groups quota-editors → none"),
        ("process:ops", "User bob changed: permissions none → controlplane.delete_team"),
    ]


def test_groups_and_permissions_set_in_a_shell_are_one_event_each_from_before_to_after(in_a_shell) -> None:
    """`set()` removes what goes, then adds what comes (two m2m_changed pairs): until 7 Dec that
    was two events, "groups quota-editors → none" and "groups none → ops", though it is one
    change, as the user's admin page records it."""
    bob = f.make_user("bob")
    editors, ops = _quota_editors(), Group.objects.create(name="ops")
    bob.groups.add(editors)
    bob.user_permissions.add(Permission.objects.get(codename="delete_team"))
    Event.objects.all().delete()

    bob.groups.set([ops])
    bob.user_permissions.set([Permission.objects.get(codename="change_pricerate")])
    bob.groups.set([editors, ops], clear=True)  # clear, then add all: one event too
    bob.groups.set([editors, ops], clear=True)  # the same groups again: no change, no event

    assert [(e.actor, e.message.split(" (process")[0]) for e in _user_events()] == [
        ("process:ops", "User bob changed: groups quota-editors → ops"),
        ("process:ops", "User bob changed: permissions controlplane.delete_team → controlplane.change_pricerate"),
        ("process:ops", "User bob changed: groups ops → ops, quota-editors"),
    ]
    first = _user_events()[0]
    assert first.data["before"]["groups"] == ["quota-editors"] and first.data["after"]["groups"] == ["ops"]
    assert sorted(g.name for g in get_user_model().objects.get(username="bob").groups.all()) == ["ops",
                                                                                                 "quota-editors"]


def test_a_groups_members_set_in_a_shell_are_one_event_per_user_whose_groups_changed(in_a_shell) -> None:
    bob, carol, dora = f.make_user("bob"), f.make_user("carol"), f.make_user("dora")
    editors = _quota_editors()
    editors.user_set.add(bob, carol)
    Event.objects.all().delete()

    editors.user_set.set([carol, dora])  # bob leaves, dora joins, carol stays
    editors.user_set.set([carol, dora], clear=True)  # all leave and come back: no change

    assert sorted(e.message.split(" (process")[0] for e in _user_events()) == [
        "User bob changed: groups quota-editors → none",
        "User dora changed: groups none → quota-editors",
    ]


@pytest.mark.django_db(transaction=True)
def test_a_group_left_then_joined_in_two_transactions_is_two_events(in_a_shell) -> None:
    """Each committed change is its own event: only a change made in one transaction (a set())
    is recorded as one."""
    bob = f.make_user("bob")
    editors, ops = _quota_editors(), Group.objects.create(name="ops")
    bob.groups.add(editors)
    Event.objects.all().delete()

    bob.groups.remove(editors)  # the shell's autocommit: committed here
    bob.groups.add(ops)
    bob.groups.set([editors])  # one transaction: one event

    assert [e.message.split(" (process")[0] for e in _user_events()] == [
        "User bob changed: groups quota-editors → none",
        "User bob changed: groups none → ops",
        "User bob changed: groups ops → quota-editors",
    ]


def test_a_groups_permissions_changed_and_the_group_deleted_on_its_page_are_recorded(boss) -> None:
    bob = f.make_user("bob")
    editors = _quota_editors()
    bob.groups.add(editors)
    Event.objects.all().delete()
    path = f"/admin/auth/group/{editors.pk}/change/"
    form = f.opened_admin_form(boss, path)
    form["permissions"] = [Permission.objects.get(codename=name).pk for name in ("change_quota", "delete_quota")]

    assert boss.post(path, form).status_code == 302
    assert boss.post(f"/admin/auth/group/{editors.pk}/delete/", {"post": "yes"}).status_code == 302

    changed, deleted, left = Event.objects.filter(kind=EventKind.CONFIG_CHANGED).order_by("id")
    assert changed.reason == "GroupChanged" and changed.actor == "user:boss"
    assert changed.message == ("Group quota-editors changed: permissions controlplane.change_quota → "
                               "controlplane.change_quota, controlplane.delete_quota"), changed.message
    assert deleted.reason == "GroupDeleted" and deleted.message == "Group quota-editors deleted"
    assert left.reason == "UserChanged"
    assert left.message == "User bob changed: groups quota-editors → none (group quota-editors deleted)"
    assert not get_user_model().objects.get(username="bob").groups.exists()
