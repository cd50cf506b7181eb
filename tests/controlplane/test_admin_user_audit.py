"""Who made whom an admin, or took their sign-in away, is in the audit trail.

Found by a fleet admin's review (6 Dec): on the admin's user page, ticking *Superuser status*
for bob made him an admin of the fleet (`services/access.py`: a superuser reads every team,
submits for any, edits quotas and classes) and recorded nothing in the trail the product keeps
(`config.changed`), where a membership with role admin is recorded; so were unticking *Active*
(bob signs in no more) and deleting a user, whose memberships went with them unrecorded. Only
Django's own log had it, which no `events/` query, no event search and no one but the acting
admin's "Recent actions" reads. Now a user created, changed in who they are or what they may do
(username, active, staff, superuser) or deleted on the admin's pages is a `config.changed` event
(`UserCreated`, `UserChanged`, `UserDeleted`), and a deleted user's memberships are each
recorded as deleted, as a deleted team's are.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.choices import EventKind
from controlplane.models import Event, Membership
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


def _bob() -> object:
    return get_user_model().objects.get(username="bob")


def _change(boss: Client, **values: object) -> None:
    path = f"/admin/auth/user/{_bob().pk}/change/"
    form = f.opened_admin_form(boss, path)
    for name in ("date_joined", "last_login"):  # a date and a time box each, as the page has them
        value = form.pop(name, "")
        form[f"{name}_0"], form[f"{name}_1"] = (value.strftime("%Y-%m-%d"), value.strftime("%H:%M:%S")) if value \
            else ("", "")
    for name, value in values.items():
        if value is False:
            form.pop(name, None)  # an unticked box is not sent
        else:
            form[name] = value
    r = boss.post(path, form)
    assert r.status_code == 302, r.context["adminform"].form.errors if r.context else r


def test_making_a_user_superuser_is_recorded_with_who_and_what(boss) -> None:
    _change(boss, is_superuser="on", is_staff="on")

    [event] = Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="UserChanged")
    assert event.actor == "user:boss"
    assert event.message == "User bob changed: staff no → yes, superuser no → yes", event.message
    assert event.data["before"]["is_superuser"] is False and event.data["after"]["is_superuser"] is True
    assert event.data["model"] == "user"


def test_taking_away_a_sign_in_is_recorded(boss) -> None:
    _change(boss, is_active=False)

    [event] = Event.objects.filter(reason="UserChanged")
    assert event.message == "User bob changed: active yes → no", event.message


def test_a_change_of_nothing_audited_records_nothing(boss) -> None:
    _change(boss, first_name="Robert")

    assert not Event.objects.filter(reason="UserChanged").exists()


def test_a_user_added_is_recorded(boss) -> None:
    form = f.admin_change_form(boss.get("/admin/auth/user/add/"))  # its roles' management form too
    form.update({"username": "carol", "password1": "a-long-pass-phrase-9", "password2": "a-long-pass-phrase-9",
                 "usable_password": "true"})
    r = boss.post("/admin/auth/user/add/", form)
    assert r.status_code == 302, r.context["adminform"].form.errors if r.context else r

    [event] = Event.objects.filter(reason="UserCreated", data__after__username="carol")
    assert event.message == "User carol created" and event.actor == "user:boss"
    assert "password" not in str(event.data)


def test_a_user_deleted_is_recorded_with_the_memberships_that_went_with_them(boss) -> None:
    bob = _bob()
    assert Membership.objects.filter(user=bob).exists()

    r = boss.post(f"/admin/auth/user/{bob.pk}/delete/", {"post": "yes"})

    assert r.status_code == 302
    [deleted] = Event.objects.filter(reason="UserDeleted")
    assert deleted.message == "User bob deleted" and deleted.data["before"]["username"] == "bob"
    [membership] = Event.objects.filter(reason="MembershipDeleted")
    assert membership.message == "Membership of bob in vision deleted (user bob deleted)", membership.message


def test_the_users_list_bulk_delete_records_each(boss) -> None:
    f.make_user("dora")
    ids = list(get_user_model().objects.filter(username__in=["bob", "dora"]).values_list("pk", flat=True))

    r = boss.post("/admin/auth/user/", {"action": "delete_selected", "_selected_action": ids, "post": "yes"})

    assert r.status_code == 302
    assert sorted(Event.objects.filter(reason="UserDeleted").values_list("message", flat=True)) == [
        "User bob deleted", "User dora deleted"]


def _password_events() -> list[Event]:
    return list(Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="UserPasswordChanged"))


def test_a_password_set_on_a_users_page_is_recorded_without_it(boss) -> None:
    """6 Dec: an admin setting bob's password (his API tokens revoked with it) left nothing in the
    trail; user created, changed and deleted did."""
    bob = _bob()
    r = boss.post(f"/admin/auth/user/{bob.pk}/password/",
                  {"usable_password": "true", "password1": "a-new-pass-phrase-7", "password2": "a-new-pass-phrase-7"})
    assert r.status_code == 302, r.context["adminform"].form.errors if r.context else r

    [event] = _password_events()
    assert event.actor == "user:boss" and event.message == "User bob's password changed"
    assert event.data == {"model": "user", "user": "bob", "usable_password": True}
    assert "a-new-pass-phrase-7" not in str(event.data) + event.message
    assert _bob().password not in str(event.data) + event.message
    listed = boss.get("/api/v1/events/?kind=config.changed").json()["results"]
    assert [e["message"] for e in listed if e["reason"] == "UserPasswordChanged"] == ["User bob's password changed"]


def test_a_password_made_unusable_is_recorded(boss) -> None:
    r = boss.post(f"/admin/auth/user/{_bob().pk}/password/", {"usable_password": "false", "unset-password": "1"})
    assert r.status_code == 302

    [event] = _password_events()
    assert event.message == "User bob's password-based sign-in disabled" and not _bob().has_usable_password()


def test_a_password_form_refused_records_nothing(boss) -> None:
    r = boss.post(f"/admin/auth/user/{_bob().pk}/password/",
                  {"usable_password": "true", "password1": "one-pass-phrase-1", "password2": "another-phrase-2"})
    assert r.status_code == 200
    assert _password_events() == []


def test_an_admins_own_password_change_is_recorded(boss) -> None:
    r = boss.post("/admin/password_change/", {"old_password": "boss", "new_password1": "a-new-pass-phrase-7",
                                              "new_password2": "a-new-pass-phrase-7"})
    assert r.status_code == 302, r.context["form"].errors if r.context else r

    [event] = _password_events()
    assert event.actor == "user:boss" and event.message == "User boss's password changed"
    assert boss.get("/admin/").status_code == 200  # still signed in (the session's hash follows)


def test_a_wrong_old_password_changes_and_records_nothing(boss) -> None:
    r = boss.post("/admin/password_change/", {"old_password": "wrong", "new_password1": "a-new-pass-phrase-7",
                                              "new_password2": "a-new-pass-phrase-7"})
    assert r.status_code == 200 and _password_events() == []


def test_the_own_password_form_still_asks_a_stranger_to_sign_in(fleet) -> None:
    r = Client().post("/admin/password_change/", {"old_password": "x", "new_password1": "y", "new_password2": "y"})
    assert r.status_code == 302 and "/admin/login/" in r["Location"] and _password_events() == []
