"""/notifications/: a user's webhooks and their last deliveries, theirs only, in a fixed number of
queries; the API behind its buttons refuses another user's hook; its field-error slots cover
every field the API names."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.models import NotificationDelivery, NotificationHook, Team
from controlplane.services import notifications

pytestmark = pytest.mark.django_db

API = "/api/v1/notification-hooks/"
SLACK = "https://hooks.slack.com/services/T0AAAA1111/B0BBBB2222/abcdEFGHijklMNOPqrstUVWX"


def hook(username: str, url: str = SLACK, *, events: list[str] | None = None, team: str | None = None,
         active: bool = True) -> NotificationHook:
    return NotificationHook.objects.create(
        user=get_user_model().objects.get(username=username), url=url, events=events or ["started", "failed"],
        team=Team.objects.get(name=team) if team else None, secret="s" * 32, active=active,
        created_at=timezone.now())


def delivery(h: NotificationHook, event: str = "failed", **fields: Any) -> NotificationDelivery:
    fields.setdefault("created_at", timezone.now())
    return NotificationDelivery.objects.create(hook=h, event=event, payload={"text": "x"}, **fields)


def hook_ids(content: bytes) -> list[int]:
    return [int(i) for i in re.findall(rb'data-hook="(\d+)"', content)]


def test_the_page_lists_the_users_hooks_with_their_last_deliveries_and_no_one_elses(
        client_for: Callable[[str], Client]) -> None:
    own = hook("alice", events=["started", "failed"])
    team = hook("alice", "https://chat.example.org/hooks/x?token=hunter2hunter2", events=["preempted"],
                team="vision", active=False)
    bobs = hook("bob", "https://bob.example.org/secret-path-of-bob", events=["succeeded"])
    delivery(bobs, created_at=timezone.now())
    now = timezone.now()
    for i in range(7):  # only the newest five are listed, newest first
        delivery(own, "started", created_at=now - timedelta(minutes=10 - i), attempts=1, last_status=200,
                 delivered_at=now)
    waiting = delivery(own, "failed", attempts=2, last_status=503, last_error="HTTP 503: down",
                       next_attempt_at=now + timedelta(minutes=2))
    gave_up = delivery(team, "preempted", attempts=10, last_status=None,
                       last_error="gave up after 10 attempts; the last: connection refused")

    response = client_for("alice").get("/notifications/")
    assert response.status_code == 200
    content = response.content
    text = content.decode()
    assert hook_ids(content) == [own.pk, team.pk]
    # Credentials in a URL are hidden: Slack's key in its path, a token in the query.
    assert "abcdEFGHijklMNOPqrstUVWX" not in text and "hunter2hunter2" not in text
    assert "https://hooks.slack.com/services/T0AAAA1111/B0BBBB2222/abc…" in text
    assert "https://chat.example.org/hooks/x?token=hun…" in text
    # Another user's hook is not there, nor any word of it.
    assert "bob.example.org" not in text and f'id="hook-{bobs.pk}"' not in text

    rows = {h.hook.pk: h for h in response.context["hooks"]}
    assert [d.id for d in rows[own.pk].deliveries] == sorted(
        NotificationDelivery.objects.filter(hook=own).values_list("id", flat=True), reverse=True)[:5]
    first = rows[own.pk].deliveries[0]
    assert (first.id, first.status, first.result, first.attempts) == (waiting.pk, "waiting", "HTTP 503: down", 2)
    assert rows[own.pk].deliveries[1].status == "delivered" and rows[own.pk].deliveries[1].result == "HTTP 200"
    (last,) = rows[team.pk].deliveries
    assert (last.id, last.status) == (gave_up.pk, "failed")
    assert last.result.startswith("gave up after 10 attempts")
    # What each hook is: events, whose jobs, enabled, its state in words.
    own_html = text[text.index(f'id="hook-{own.pk}"'):text.index(f'id="hook-{team.pk}"')]
    assert "started, failed" in own_html and "my own jobs" in own_html
    assert "waiting: HTTP 503: down" in own_html and "1 delivery(ies) waiting to be sent" in own_html
    waiting_row = re.search(rf'<tr data-delivery="{waiting.pk}" data-status="waiting">(.*?)</tr>', own_html, re.S)
    cells = [c.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", waiting_row.group(1), re.S)]
    assert cells[1:4] == ["failed", "waiting: HTTP 503: down", "2"]
    assert cells[4].startswith(f"{waiting.next_attempt_at:%Y-%m-%d %H:%M:%S} UTC (in ")
    team_html = text[text.index(f'id="hook-{team.pk}"'):]
    assert "every job of team vision" in team_html and "no: paused" in team_html and "Resume" in team_html
    assert "failed: gave up after 10 attempts" in team_html

    # The live fragment lists the same hooks.
    live = client_for("alice").get("/ui/notifications.json").json()["html"]["hooks"]
    assert hook_ids(live.encode()) == [own.pk, team.pk] and "bob.example.org" not in live


def test_bob_sees_only_his_and_an_admin_sees_her_own_on_her_page(client_for: Callable[[str], Client]) -> None:
    alices = hook("alice")
    bobs = hook("bob")
    assert hook_ids(client_for("bob").get("/notifications/").content) == [bobs.pk]
    admins = hook("admin")
    assert hook_ids(client_for("admin").get("/notifications/").content) == [admins.pk]
    assert alices.pk not in hook_ids(client_for("admin").get("/ui/notifications.json").json()["html"]["hooks"].encode())


def test_an_admin_reads_another_users_hooks_by_name_and_a_member_may_not(
        client_for: Callable[[str], Client]) -> None:
    """As the API's `?user=`: admins see (and through the API change) every hook."""
    bobs = hook("bob")
    admin = client_for("admin")
    page = admin.get("/notifications/?user=bob")
    assert page.status_code == 200 and hook_ids(page.content) == [bobs.pk]
    text = page.content.decode()
    assert "Notifications of bob" in text and 'id="add-hook"' not in text  # the API creates only your own
    assert 'data-live-url="/ui/notifications.json?user=bob"' in text
    assert hook_ids(admin.get("/ui/notifications.json?user=bob").json()["html"]["hooks"].encode()) == [bobs.pk]
    assert admin.get("/notifications/?user=nosuch").status_code == 404

    alice = client_for("alice")
    assert alice.get("/notifications/?user=bob").status_code == 404
    assert alice.get("/ui/notifications.json?user=bob").status_code == 404
    assert alice.get("/notifications/?user=alice").status_code == 200


def test_the_buttons_api_refuses_another_users_hook(client_for: Callable[[str], Client]) -> None:
    bobs = hook("bob", active=True)
    alice = client_for("alice")
    assert alice.patch(f"{API}{bobs.pk}/", {"active": False}, content_type="application/json").status_code == 404
    assert alice.post(f"{API}{bobs.pk}/test/").status_code == 404
    assert alice.delete(f"{API}{bobs.pk}/").status_code == 404
    bobs.refresh_from_db()
    assert bobs.active is True and not NotificationDelivery.objects.filter(hook=bobs).exists()


def test_the_page_calls_the_api_with_the_session_and_its_csrf_token(demo: None) -> None:
    """What the page's script does: same-origin session, the token from the page's meta tag."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(get_user_model().objects.get(username="alice"))
    page = browser.get("/notifications/").content.decode()
    token = re.search(r'<meta name="csrf-token" content="([^"]+)">', page).group(1)
    api_url = re.search(r'id="add-hook"[^>]*data-api-url="([^"]+)"', page).group(1)
    body = {"url": "https://hooks.slack.com/services/T0/B0/x", "events": ["failed"]}

    assert browser.post(api_url, body, content_type="application/json").status_code == 403
    assert not NotificationHook.objects.exists()
    created = browser.post(api_url, body, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert created.status_code == 201 and len(created.json()["secret"]) >= 32
    h = NotificationHook.objects.get()
    pause = re.search(r'data-hook-action="pause" data-method="PATCH" data-body=\'([^\']+)\' data-url="([^"]+)"',
                      browser.get("/ui/notifications.json").json()["html"]["hooks"])
    assert pause.group(2) == f"{API}{h.pk}/"
    assert browser.patch(pause.group(2), pause.group(1), content_type="application/json",
                         HTTP_X_CSRFTOKEN=token).status_code == 200
    h.refresh_from_db()
    assert h.active is False


@pytest.mark.parametrize("body", [
    {"url": "ftp://example.org/x", "events": ["nope"], "team": "language", "secret": "short"},
    {"url": "https://elsewhere.example.com/x", "events": []},
], ids=["every-field", "host-not-allowed-and-no-events"])
def test_every_field_the_api_refuses_has_its_slot_on_the_form(client_for: Callable[[str], Client], settings: Any,
                                                             body: dict[str, Any]) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_HOSTS": "hooks.slack.com"}
    alice = client_for("alice")
    refused = alice.post(API, body, content_type="application/json")
    assert refused.status_code == 400
    fields = {f.split(".")[0] for f in refused.json()["errors"]}
    assert fields == set(body)  # each field given was refused
    page = alice.get("/notifications/").content.decode()
    slots = set(re.findall(r'data-error-for="([^"]+)"', page))
    assert fields <= slots, fields - slots
    inputs = set(re.findall(r'data-field="([^"]+)"', page))
    if 'name="events" value="started" data-event' in page:
        inputs.add("events")
    assert fields <= inputs, fields - inputs
    # The teams offered are those the API takes from her: vision only (in the add and edit forms).
    assert re.findall(r'<option value="(\w+)">every job of team', page) == ["vision", "vision"]


def test_every_field_a_change_is_refused_on_has_its_slot_on_the_edit_form(client_for: Callable[[str], Client],
                                                                         settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_NETWORKS": [], "WEBHOOK_ALLOW_HTTP": False}
    own = hook("alice")
    alice = client_for("alice")
    body = {"url": "http://93.184.216.34/hook", "events": ["nope"], "team": "language", "active": "maybe"}
    refused = alice.patch(f"{API}{own.pk}/", body, content_type="application/json")
    assert refused.status_code == 400
    fields = {f.split(".")[0] for f in refused.json()["errors"]}
    assert fields == set(body)
    page = alice.get("/notifications/").content.decode()
    editor = page[page.index('id="edit-hook"'):]
    editor = editor[:editor.index("</section>")]
    assert fields <= set(re.findall(r'data-error-for="([^"]+)"', editor))
    assert fields - {"events"} <= set(re.findall(r'data-field="([^"]+)"', editor)) and "data-event" in editor
    # Each hook offers Edit and New secret; the page never holds the URL's hidden part.
    article = page[page.index(f'id="hook-{own.pk}"'):]
    assert 'data-hook-action="edit"' in article and 'data-hook-action="rotate"' in article
    assert f'data-url="{API}{own.pk}/rotate-secret/"' in article
    assert 'data-events="started,failed"' in article and 'data-active="true"' in article and 'data-team=""' in article
    assert "abcdEFGHijklMNOPqrstUVWX" not in page


def test_queries_do_not_grow_with_hooks_or_deliveries(client_for: Callable[[str], Client]) -> None:
    alice = client_for("alice")

    def counts() -> tuple[int, int]:
        out = []
        for url in ("/notifications/", "/ui/notifications.json"):
            with CaptureQueriesContext(connection) as queries:
                assert alice.get(url).status_code == 200
            out.append(len(queries))
        return out[0], out[1]

    alice_user = get_user_model().objects.get(username="alice")
    h = notifications.create_hook(alice_user, url=SLACK, events=["failed"], team=None, actor="user:alice")
    delivery(h)
    few = counts()
    for i in range(12):
        more = notifications.create_hook(alice_user, url=SLACK, events=["started"], actor="user:alice",
                                         team=Team.objects.get(name="vision") if i % 2 else None)
        for _ in range(3):
            more = notifications.change_hook(more, {"active": not more.active}, actor="user:alice")
        for _ in range(8):
            delivery(more, attempts=1, last_status=200, delivered_at=timezone.now())
    many = counts()
    assert few == many, (few, many)
    hooks = client_for("alice").get("/notifications/").context["hooks"]
    assert len(hooks) == 13 and sum(len(row.history) for row in hooks) == 13 + 12 * 3
    # session, user, memberships, the teams offered, the hooks, their deliveries, their
    # histories; the live fragment neither memberships nor teams
    assert few == (7, 5), few


def test_the_nav_and_the_user_name_lead_to_the_page(client_for: Callable[[str], Client]) -> None:
    page = client_for("alice").get("/").content.decode()
    assert 'data-nav="notifications"' in page
    assert '<a class="user" href="/notifications/"' in page
    assert 'data-nav="notifications"' not in client_for("finn").get("/").content.decode()
    active = client_for("alice").get("/notifications/").content.decode()
    assert 'href="/notifications/" data-nav="notifications" class="active"' in active


@pytest.mark.parametrize(("url", "shown"), [
    (SLACK, "https://hooks.slack.com/services/T0AAAA1111/B0BBBB2222/abc…"),
    ("https://mm.example.org/hooks/xjdu83hd72hsy3hdnsk2hd8sj1", "https://mm.example.org/hooks/xjd…"),
    ("https://x.example.org/in?token=abcdefgh&v=1", "https://x.example.org/in?token=abc…&v=…"),
    ("http://127.0.0.1:8080/hook", "http://127.0.0.1:8080/hook"),
    ("https://u:pw@x.example.org/a", "https://…@x.example.org/a"),
    ("http://[::1]:9000/webhooks/receiver-of-jobs", "http://[::1]:9000/webhooks/receiver-of-jobs"),
])
def test_masked_url_hides_what_looks_like_a_credential(url: str, shown: str) -> None:
    assert notifications.masked_url(url) == shown


def test_each_hook_has_its_history_masked_and_no_other_hooks(client_for: Callable[[str], Client]) -> None:
    alice = get_user_model().objects.get(username="alice")
    own = notifications.create_hook(alice, url=SLACK, events=["failed"], team=None, actor="user:alice")
    notifications.change_hook(own, {"url": "https://chat.example.org/hooks/x?token=hunter2hunter2",
                                    "events": ["started"]}, actor="user:alice")
    notifications.change_hook(own, {"active": False}, actor="user:root")
    other = notifications.create_hook(alice, url=SLACK, events=["started"], team=None, actor="user:alice")
    bobs = notifications.create_hook(get_user_model().objects.get(username="bob"), url="https://bob.example.org/b",
                                     events=["failed"], team=None, actor="user:bob")
    old = hook("alice")  # made before changes were recorded: no event

    text = client_for("alice").get("/notifications/").content.decode()

    own_html = text[text.index(f'id="hook-{own.pk}"'):text.index(f'id="hook-{other.pk}"')]
    details = own_html[own_html.index(f'<details class="hook-history" data-history="{own.pk}">'):]
    assert "History <small class=\"muted\">(3 changes)</small>" in details
    rows = re.findall(r'<tr data-change="(\d+)" data-kind="(\w+)">(.*?)</tr>', details, re.S)
    cells = [[c.strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)] for _, _, row in rows]
    assert [kind for _, kind, _ in rows] == ["changed", "changed", "created"]
    assert [c[1:] for c in cells] == [
        ["root", "changed: paused"],
        ["alice", "changed: url https://hooks.slack.com/services/T0AAAA1111/B0BBBB2222/abc… → "
                  "https://chat.example.org/hooks/x?token=hun…; events failed → started"],
        ["alice", "created: failed of alice&#x27;s own jobs to https://hooks.slack.com/services/T0AAAA1111/B0BBBB2222/abc…"],
    ]
    assert cells[0][0].endswith(" UTC")
    assert "hunter2hunter2" not in text and "abcdEFGHijklMNOPqrstUVWX" not in text
    other_html = text[text.index(f'id="hook-{other.pk}"'):text.index(f'id="hook-{old.pk}"')]
    assert "(1 change)" in other_html and "changed: paused" not in other_html
    old_html = text[text.index(f'id="hook-{old.pk}"'):]
    assert "(0 changes)" in old_html and "No recorded changes" in old_html
    assert "bob.example.org" not in text and f'data-history="{bobs.pk}"' not in text

