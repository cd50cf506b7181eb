"""A user deleted leaves an event on each of their API tokens, which go with them.

Found 7 Dec: `ApiToken.user` is CASCADE, so deleting a user (the admin's *Delete*, "Delete
selected users", `manage.py shell`) deleted every token they had signed in with, and the trail
said nothing of it: the tokens an admin revokes on purpose are an `ApiTokenRevoked` event, but
one a deletion ended was not, and "which clients stopped working, and since when" could not be
read from the events. Now the deletion records one `config.changed` event per token (reason
`ApiTokenOwnerDeleted`: the kind an admin's revocation records, and why), naming the token by
its id and when it was issued, never its key nor its digest, with the same actor as the
`UserDeleted` event, in the deletion's transaction, written in bulk whatever their number. The
confirmation page says, before, which tokens stop working.
"""

from __future__ import annotations

import html
import json
import os
from datetime import UTC, datetime
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction

from controlplane.choices import EventKind
from controlplane.models import ApiToken, Event
from controlplane.services import token_digests
from tests.controlplane import factories as f

pytestmark = pytest.mark.django_db
SHELL = "manage.py shell, run as OS user ops: no page or command said who)"  # conftest's in_a_shell


def _token_events() -> list[Event]:
    return list(Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason="ApiTokenOwnerDeleted").order_by("id"))


def _issued(user: Any, when: datetime) -> tuple[str, ApiToken]:
    key = f.token_for(user)
    token = ApiToken.objects.get(digest=token_digests.digest(key))
    ApiToken.objects.filter(pk=token.pk).update(created=when)
    token.refresh_from_db()
    return key, token


def _text(response: Any) -> str:
    assert response.status_code == 200
    return " ".join(html.unescape(response.content.decode()).split())


def test_a_users_tokens_deleted_with_them_on_the_admins_page_are_each_an_event_naming_no_key(fleet, boss) -> None:
    dora, carl = f.make_user("dora", team=fleet.ml), f.make_user("carl", team=fleet.ml)
    laptop_key, laptop = _issued(dora, datetime(2026, 12, 1, 9, 0, 12, tzinfo=UTC))
    ci_key, ci = _issued(dora, datetime(2026, 12, 5, 17, 30, tzinfo=UTC))
    carls_key = f.token_for(carl)

    assert boss.post(f"/admin/auth/user/{dora.pk}/delete/", {"post": "yes"}).status_code == 302

    [deleted] = Event.objects.filter(reason="UserDeleted")
    events = _token_events()
    assert [e.data["before"]["id"] for e in events] == [laptop.pk, ci.pk]
    for event, token, issued in ((events[0], laptop, "2026-12-01 09:00 UTC"), (events[1], ci, "2026-12-05 17:30 UTC")):
        assert event.actor == deleted.actor == "user:boss"
        assert event.message == (f"API token {token.pk} of dora (issued {issued}) revoked: its owner dora was deleted "
                                 "by boss"), event.message
        assert event.data == {"model": "apitoken", "user": "dora", "after": None,
                              "before": {"id": token.pk, "user": "dora",
                                         "created": token.created.isoformat().replace("+00:00", "Z")}}
    written = json.dumps([[e.message, e.data] for e in Event.objects.all()])
    for secret in (laptop_key, ci_key, laptop.digest, ci.digest, laptop_key.removeprefix("qmu_")):
        assert secret not in written
    assert not ApiToken.objects.filter(user_id=dora.pk).exists()
    assert ApiToken.objects.get(user=carl).digest == token_digests.digest(carls_key)  # another's stays


def test_delete_selected_users_records_each_ones_tokens(fleet, boss) -> None:
    dora, carl, gus = (f.make_user(name, team=fleet.ml) for name in ("dora", "carl", "gus"))
    f.token_for(dora)
    f.token_for(carl)
    f.token_for(carl)

    answer = boss.post("/admin/auth/user/", {"action": "delete_selected", "post": "yes",
                                             "_selected_action": [dora.pk, carl.pk, gus.pk]})

    assert answer.status_code == 302
    assert sorted(e.data["user"] for e in _token_events()) == ["carl", "carl", "dora"]
    assert {e.actor for e in _token_events()} == {"user:boss"}
    assert not ApiToken.objects.exists()


def test_a_users_tokens_deleted_in_a_shell_name_the_process(fleet, in_a_shell) -> None:
    dora = f.make_user("dora")
    f.token_for(dora)

    get_user_model().objects.filter(username="dora").delete()

    [event] = _token_events()
    assert event.actor == "process:ops"
    assert event.message.endswith(f"its owner dora was deleted by process:ops (process {os.getpid()}, {SHELL}"), \
        event.message
    assert event.data["process"] == "manage.py shell" and event.data["os_user"] == "ops"


def test_a_user_with_no_token_records_no_token_event(fleet, boss) -> None:
    dora = f.make_user("dora")

    assert boss.post(f"/admin/auth/user/{dora.pk}/delete/", {"post": "yes"}).status_code == 302

    assert _token_events() == []
    assert Event.objects.filter(reason="UserDeleted").count() == 1


def test_a_deletion_rolled_back_leaves_no_token_event_and_the_token(fleet, in_a_shell) -> None:
    dora = f.make_user("dora")
    f.token_for(dora)
    pk = dora.pk

    with pytest.raises(RuntimeError), transaction.atomic():
        dora.delete()
        raise RuntimeError("the script failed after the delete")

    assert _token_events() == []
    assert ApiToken.objects.filter(user_id=pk).count() == 1


def test_the_confirmation_page_says_which_tokens_stop_working(fleet, boss) -> None:
    dora, erin = f.make_user("dora", team=fleet.ml), f.make_user("erin", team=fleet.ml)
    _, first = _issued(dora, datetime(2026, 12, 1, 9, 0, tzinfo=UTC))
    _, second = _issued(dora, datetime(2026, 12, 5, 17, 30, tzinfo=UTC))
    _, only = _issued(erin, datetime(2026, 12, 6, 8, 15, tzinfo=UTC))

    page = _text(boss.get(f"/admin/auth/user/{dora.pk}/delete/"))
    both = _text(boss.post("/admin/auth/user/", {"action": "delete_selected",
                                                 "_selected_action": [dora.pk, erin.pk]}))

    said = (f"dora's 2 API tokens are deleted with the account (token {first.pk} issued 2026-12-01 09:00 UTC, token {second.pk} "
            "issued 2026-12-05 17:30 UTC): every client signed in as dora (qm login) is refused from then on, and "
            "the audit trail says so of each")
    assert said in page
    assert said in both
    assert (f"erin's 1 API token is deleted with the account (token {only.pk} issued 2026-12-06 08:15 UTC): every client signed "
            "in as erin (qm login) is refused from then on, and the audit trail says so") in both
    gus = f.make_user("gus")
    assert "API token" not in _text(boss.get(f"/admin/auth/user/{gus.pk}/delete/"))


def test_the_confirmation_lists_each_token_by_id_owner_and_issue_time_never_its_key(fleet, boss) -> None:
    """Django's list of what goes with the user named a token "Api token: API token 12 of 7" (the
    owner's user id); it names the owner and when the token was issued, as the events do."""
    dora, erin = f.make_user("dora", team=fleet.ml), f.make_user("erin", team=fleet.ml)
    key, token = _issued(dora, datetime(2026, 12, 1, 9, 0, 12, tzinfo=UTC))
    erins_key, erins = _issued(erin, datetime(2026, 12, 6, 8, 15, tzinfo=UTC))

    page = _text(boss.get(f"/admin/auth/user/{dora.pk}/delete/"))
    both = _text(boss.post("/admin/auth/user/", {"action": "delete_selected",
                                                 "_selected_action": [dora.pk, erin.pk]}))

    line = f"API token: token {token.pk} of dora, issued 2026-12-01 09:00 UTC"
    assert line in page and line in both
    assert f"API token: token {erins.pk} of erin, issued 2026-12-06 08:15 UTC" in both
    assert "Api token" not in page + both and f"of {dora.pk}" not in page
    for secret in (key, token.digest, erins_key, erins.digest):
        assert secret not in page + both
