"""Every change of a user's password is one `UserPasswordChanged` event, whatever made it.

Found 7 Dec: the admin's pages and `manage.py changepassword` recorded theirs, but a password
set anywhere else (`manage.py shell`: `u.set_password(...); u.save()`, a one-off script, a
future view) left nothing in the trail, though it opens the fleet to whoever knows it. Now the
user's save itself compares the stored hash (services/config_audit.py, signals.py): a change
with no page or command saying who is recorded with the process that made it
(`process:<OS user>`), and the audited paths still record exactly one event, theirs.
"""

from __future__ import annotations

import getpass
import os
import sys
from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command
from django.test import Client

from controlplane.choices import EventKind
from controlplane.models import Event
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

NEW = "a-new-pass-phrase-7"


@pytest.fixture
def in_a_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """`manage.py shell -c "…"` run by OS user ops: the command line holds the secret itself."""
    monkeypatch.setattr(sys, "argv", ["/srv/qm/manage.py", "shell", "-c", f"u.set_password('{NEW}')"])
    monkeypatch.setattr(getpass, "getuser", lambda: "ops")


def _password_events() -> list[Event]:
    return list(Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="UserPasswordChanged").order_by("id"))


def _user(name: str = "bob"):  # type: ignore[no-untyped-def]
    return get_user_model().objects.get(username=name)


def test_a_password_set_in_a_shell_is_recorded_once_with_the_process_and_no_secret(in_a_shell) -> None:
    f.make_user("bob")
    bob = _user()

    bob.set_password(NEW)
    bob.save()

    [event] = _password_events()
    assert event.actor == "process:ops"
    pid = os.getpid()
    assert event.message == (f"User bob's password changed (process {pid}, manage.py shell, run as OS user ops: "
                             "no page or command said who)")
    assert event.data == {"model": "user", "user": "bob", "usable_password": True,
                          "process": "manage.py shell", "os_user": "ops", "pid": pid}
    said = f"{event.message} {event.data} {event.actor}"
    assert NEW not in said and _user().password not in said
    assert _user().check_password(NEW)


def test_a_password_made_unusable_in_a_shell_is_recorded(in_a_shell) -> None:
    f.make_user("bob")
    bob = _user()

    bob.set_unusable_password()
    bob.save()

    [event] = _password_events()
    assert event.message.startswith("User bob's password-based sign-in disabled (process ")
    assert event.data["usable_password"] is False


def test_saving_twice_or_without_a_new_password_records_nothing_more(in_a_shell) -> None:
    f.make_user("bob")
    bob = _user()
    bob.set_password(NEW)
    bob.save()
    bob.save()  # the same hash: no second change
    bob.email = "bob@example.org"
    bob.save()
    get_user_model().objects.create_user("carol", password="a-long-pass-phrase-9")  # created, not changed

    assert len(_password_events()) == 1


def test_a_sign_in_that_rehashes_the_password_is_no_change(settings) -> None:
    """Django stores the same password under the preferred hasher at a sign-in (check_password's
    setter, "hash upgrades shouldn't be considered password changes"): the hash differs, the
    password does not."""
    fast = settings.PASSWORD_HASHERS[0]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", fast]
    f.make_user("bob", password=NEW)
    stored = _user().password
    settings.PASSWORD_HASHERS = [fast, "django.contrib.auth.hashers.MD5PasswordHasher"]

    assert authenticate(username="bob", password=NEW) is not None

    assert _user().password != stored and not _user().password.startswith("md5$")  # rehashed
    assert _password_events() == []


def test_changepassword_still_records_exactly_one_event_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    f.make_user("bob")
    given = iter([NEW, NEW])
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": next(given))
    monkeypatch.setattr(getpass, "getuser", lambda: "ops")

    call_command("changepassword", "bob", stdout=StringIO())

    [event] = _password_events()
    assert event.actor == "manage.py:ops"
    assert event.message == "User bob's password changed (manage.py changepassword, run as OS user ops)"


def test_the_admins_password_page_still_records_exactly_one_event_its_own() -> None:
    f.make_user("boss", superuser=True)
    bob = f.make_user("bob")
    browser = Client()
    assert browser.login(username="boss", password="boss")

    r = browser.post(f"/admin/auth/user/{bob.pk}/password/",
                     {"usable_password": "true", "password1": NEW, "password2": NEW})

    assert r.status_code == 302
    [event] = _password_events()
    assert event.actor == "user:boss" and event.message == "User bob's password changed"
