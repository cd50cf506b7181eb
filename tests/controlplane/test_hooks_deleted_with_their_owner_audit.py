"""A notification hook deleted with its user or its team is in the audit trail.

Found 7 Dec: a hook is deleted with its owner (NotificationHook.user and .team are CASCADE).
Deleting a user on the admin's page, or a team through the API or the admin, recorded the user,
the team, their memberships, quotas and projects, but not the hooks that went with them: the
trail kept each hook's `NotificationHookCreated` and never said it stopped, so "where do the
fleet's job events go" read from it still named URLs nothing sends to. Now each is a
`NotificationHookDeleted` event saying why, and the team's DELETE answers it among what went.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from controlplane.models import Event, NotificationHook
from controlplane.services import notifications
from tests.controlplane import factories as f
from tests.controlplane.fleet_fixture import client_for

pytestmark = pytest.mark.django_db
J = "/api/v1"


def _hook(user, team=None) -> NotificationHook:  # type: ignore[no-untyped-def]
    return notifications.create_hook(user, url="https://hooks.example.com/qm", events=["job.finished"], team=team,
                                     actor=f"user:{user.get_username()}")


def _hook_deletions() -> list[Event]:
    return list(Event.objects.filter(reason="NotificationHookDeleted").order_by("id"))


def test_a_users_hooks_deleted_with_them_on_the_admins_page_are_recorded(fleet) -> None:
    f.make_user("boss", superuser=True)
    boss = Client()
    assert boss.login(username="boss", password="boss")
    dora = f.make_user("dora")
    hook = _hook(dora)

    assert boss.post(f"/admin/auth/user/{dora.pk}/delete/", {"post": "yes"}).status_code == 302

    [event] = _hook_deletions()
    assert event.actor == "user:boss"
    assert event.message == (f"Notification hook {hook.pk} of dora deleted (it sent job.finished of dora's own jobs "
                             "to https://hooks.example.com/qm) (user dora deleted)"), event.message
    assert event.data["before"]["id"] == hook.pk
    assert not NotificationHook.objects.exists()


def test_a_users_hooks_deleted_with_them_in_a_shell_are_recorded(fleet) -> None:
    dora = f.make_user("dora")
    _hook(dora)

    get_user_model().objects.filter(username="dora").delete()

    [event] = _hook_deletions()
    assert event.actor.startswith("process:") and event.message.endswith("(user dora deleted)")


def test_a_teams_hooks_deleted_with_it_through_the_api_are_recorded_and_answered(fleet) -> None:
    team = f.make_team("tmpteam")
    tess = f.make_user("tess", team=team)
    hook = _hook(tess, team=team)
    admin = client_for(fleet, "admin")

    r = admin.delete(f"{J}/teams/{team.pk}/")

    assert r.status_code == 200, r.content
    assert (f"Notification hook {hook.pk} of tess, which sent job.finished of every job of team tmpteam to "
            "https://hooks.example.com/qm, is deleted") in r.json()["consequences"], r.json()
    [event] = _hook_deletions()
    assert event.actor == "user:root" and event.message.endswith("(team tmpteam deleted)"), event.message
    assert not NotificationHook.objects.exists()
