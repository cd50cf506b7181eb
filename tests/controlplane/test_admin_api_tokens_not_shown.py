"""The admin never shows a user's API token. A token is the user: whoever reads it acts as them
through the API, and their actions are recorded under their name. Until 6 Dec DRF's own
"Tokens" page listed every user's live token in clear (/admin/authtoken/tokenproxy/), and its
delete confirmation and history named the token by its key.

An admin revokes a user's token with the users list's action "Revoke API tokens" (the user signs
in again with `qm login`), recorded as a config.changed event like the users' other changes."""

from __future__ import annotations

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.test import Client

from controlplane.choices import EventKind
from controlplane.models import ApiToken, Event
from controlplane.services import token_digests
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(f.make_user("boss", superuser=True))
    return client


def test_no_admin_page_shows_a_users_token(admin_client) -> None:
    alice = f.make_user("alice")
    key = f.token_for(alice)

    pages = ["/admin/", "/admin/auth/user/", f"/admin/auth/user/{alice.pk}/change/",
             f"/admin/auth/user/{alice.pk}/history/"]
    for page in pages:
        answer = admin_client.get(page)
        assert answer.status_code == 200, page
        assert key not in answer.content.decode(), page
    assert admin_client.get("/admin/authtoken/tokenproxy/").status_code == 404  # no Tokens page
    assert b"/admin/authtoken/" not in admin_client.get("/admin/").content


def test_an_admin_revokes_the_selected_users_tokens(admin_client) -> None:
    alice, bob, carol = f.make_user("alice"), f.make_user("bob"), f.make_user("carol")
    f.token_for(alice)
    f.token_for(alice)  # a second client of hers
    kept = f.token_for(carol)

    answer = admin_client.post("/admin/auth/user/", {
        "action": "revoke_api_tokens", ACTION_CHECKBOX_NAME: [alice.pk, bob.pk], "index": 0,
    }, follow=True)

    assert answer.status_code == 200
    said = answer.content.decode()
    assert "Revoked the API tokens of alice" in said and "bob had none" in said
    assert not ApiToken.objects.filter(user__in=[alice, bob]).exists()
    assert ApiToken.objects.get(user=carol).digest == token_digests.digest(kept)
    event = Event.objects.get(kind=EventKind.CONFIG_CHANGED, reason="ApiTokenRevoked")  # alice's only: bob had none
    assert event.actor == "user:boss" and event.message == "User alice's API tokens revoked"
    assert event.data == {"model": "user", "user": "alice"}  # never the key


def _revoke(client: Client, *users: object) -> object:
    return client.post("/admin/auth/user/", {
        "action": "revoke_api_tokens", ACTION_CHECKBOX_NAME: [u.pk for u in users], "index": 0}, follow=True)


def test_one_who_may_only_view_users_is_not_offered_the_revoke_and_revokes_nothing() -> None:
    """Revoking signs a user out of every client: a change of the account, not a reading of
    it. A staff operator given "Can view user" alone (a group) read the users list and ran the
    action on anyone, a superuser included, until 7 Dec: Django offers an action with no
    `allowed_permissions` to whoever may see the list."""
    from django.contrib.auth.models import Group, Permission

    viewer = f.make_user("viewer")
    viewer.is_staff = True
    viewer.save()
    readers = Group.objects.create(name="user readers")
    readers.permissions.add(Permission.objects.get(codename="view_user", content_type__app_label="auth"))
    viewer.groups.add(readers)
    boss = f.make_user("boss", superuser=True)
    key = f.token_for(boss)
    client = Client()
    client.force_login(viewer)

    listed = client.get("/admin/auth/user/")
    answer = _revoke(client, boss)

    assert listed.status_code == 200 and "revoke_api_tokens" not in listed.content.decode()
    assert answer.status_code == 200 and "Revoked" not in answer.content.decode()
    assert ApiToken.objects.get(user=boss).digest == token_digests.digest(key)
    assert not Event.objects.filter(reason="ApiTokenRevoked").exists()


def test_a_fleet_admin_by_membership_revokes_any_users_tokens_a_superusers_too() -> None:
    """Revoking takes access away and gives none: it is how an admin answers a leaked token
    (docs/operations.md), whoever's it is, and the user signs in again. A fleet admin by
    membership, who may change no account, may do it, recorded under their name."""
    from controlplane.choices import Role
    from controlplane.models import Membership

    ops = f.make_user("ops")
    Membership.objects.create(user=ops, team=None, role=Role.ADMIN)
    boss = f.make_user("boss", superuser=True)
    f.token_for(boss)
    client = Client()
    client.force_login(ops)

    answer = _revoke(client, boss)

    assert answer.status_code == 200 and "Revoked the API tokens of boss" in answer.content.decode()
    assert not ApiToken.objects.filter(user=boss).exists()
    event = Event.objects.get(reason="ApiTokenRevoked")
    assert event.actor == "user:ops" and event.message == "User boss's API tokens revoked"
