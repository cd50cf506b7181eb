"""A password changed, or a superuser made, on the command line is in the audit trail.

Found 6 Dec: a password set on the admin's pages was a `UserPasswordChanged` event and a user
added there a `UserCreated` one, but `manage.py changepassword bob` and `manage.py
createsuperuser` (the first admin of every install, and the usual way back in for an operator
locked out) left nothing in the trail. Now each records the same event the admin's pages do,
its actor the command line and the OS user who ran it, never the password nor its hash.
"""

from __future__ import annotations

import getpass
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from controlplane.choices import EventKind
from controlplane.models import Event
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db

NEW = "a-new-pass-phrase-7"


def _typed(monkeypatch: pytest.MonkeyPatch, *answers: str) -> None:
    """The operator's answers at the command's password prompts (Django reads them with getpass)."""
    given = iter(answers)
    monkeypatch.setattr(getpass, "getpass", lambda prompt="": next(given))
    monkeypatch.setattr(getpass, "getuser", lambda: "ops")


def _trail() -> list[Event]:
    return list(Event.objects.filter(kind=EventKind.CONFIG_CHANGED).order_by("id"))


def _made(name: str) -> None:
    """A user as the test found them, the trail started after (their `UserCreated` is the setup's)."""
    f.make_user(name)
    Event.objects.all().delete()


def _secrets_absent(event: Event, *secrets: str) -> None:
    said = f"{event.message} {event.data} {event.actor}"
    for secret in secrets:
        assert secret not in said


def test_changepassword_records_one_event_naming_the_command_line_and_no_secret(monkeypatch) -> None:
    _made("bob")
    _typed(monkeypatch, NEW, NEW)

    call_command("changepassword", "bob", stdout=StringIO())

    bob = get_user_model().objects.get(username="bob")
    assert bob.check_password(NEW)
    [event] = _trail()
    assert event.reason == "UserPasswordChanged"
    assert event.actor == "manage.py:ops"
    assert event.message == "User bob's password changed (manage.py changepassword, run as OS user ops)"
    assert event.data == {"model": "user", "user": "bob", "usable_password": True,
                          "command": "manage.py changepassword", "os_user": "ops"}
    _secrets_absent(event, NEW, bob.password)


def test_changepassword_refused_records_nothing(monkeypatch) -> None:
    _made("bob")
    _typed(monkeypatch, NEW, "other-1", NEW, "other-2", NEW, "other-3")

    with pytest.raises(CommandError, match="after 3 attempts"):
        call_command("changepassword", "bob", stdout=StringIO())

    assert _trail() == []
    assert get_user_model().objects.get(username="bob").check_password("bob")


def test_changepassword_of_no_such_user_records_nothing(monkeypatch) -> None:
    _typed(monkeypatch)

    with pytest.raises(CommandError, match="does not exist"):
        call_command("changepassword", "nobody", stdout=StringIO())

    assert _trail() == []


def test_createsuperuser_records_the_user_created_an_admin_without_the_password(monkeypatch) -> None:
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", NEW)
    _typed(monkeypatch)

    call_command("createsuperuser", interactive=False, username="root2", email="root2@example.org",
                 stdout=StringIO())

    made = get_user_model().objects.get(username="root2")
    assert made.is_superuser and made.check_password(NEW)
    [event] = _trail()
    assert event.reason == "UserCreated" and event.actor == "manage.py:ops"
    assert event.message == "User root2 created (manage.py createsuperuser, run as OS user ops)"
    after: dict[str, Any] = event.data["after"]
    assert after == {"id": made.pk, "username": "root2", "is_active": True, "is_staff": True, "is_superuser": True,
                     "groups": [], "user_permissions": []}
    _secrets_absent(event, NEW, made.password)


def test_createsuperuser_refused_records_nothing(monkeypatch) -> None:
    _made("taken")
    monkeypatch.setenv("DJANGO_SUPERUSER_PASSWORD", NEW)
    _typed(monkeypatch)

    with pytest.raises(CommandError, match="already taken"):
        call_command("createsuperuser", interactive=False, username="taken", email="", stdout=StringIO())

    assert _trail() == []
