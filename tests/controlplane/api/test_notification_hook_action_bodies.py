"""`POST notification-hooks/{id}/rotate-secret/` and `{id}/test/` take no fields, as every other
action that takes none: a field sent is a 400 naming it, a body that is no JSON a 400, and neither
changes the hook; no body, or `{}`, acts.

Found by the API audit (4 Dec): both ignored whatever body came, even malformed JSON, where every
other such action refuses fields (`api_mixin.refuse_fields`): `POST rotate-secret/ {"secret":
"…"}` answered 200 with a random secret, the one sent dropped without a word, and the receiver,
given the caller's secret, refused every signature after."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane.models import NotificationHook

pytestmark = pytest.mark.django_db
URL = "/api/v1/notification-hooks/"
GOOD = "https://hooks.slack.com/services/T0/B0/x"


@pytest.mark.parametrize("action", ["rotate-secret", "test"])
def test_an_action_on_a_hook_refuses_fields_and_changes_nothing(alice: APIClient, action) -> None:
    made = alice.post(URL, {"url": GOOD, "events": ["started"]}, format="json")
    hook = NotificationHook.objects.get(pk=made.json()["id"])

    r = alice.post(f"{URL}{hook.pk}/{action}/", {"secret": "mine-and-long-enough-1234"}, format="json")

    assert r.status_code == 400, r.json()
    assert list(r.json()["errors"]) == ["secret"] and f"{action} takes no fields" in r.json()["detail"], r.json()
    assert NotificationHook.objects.get(pk=hook.pk).secret == hook.secret
    assert not hook.deliveries.exists()


@pytest.mark.parametrize("action", ["rotate-secret", "test"])
def test_an_action_on_a_hook_refuses_a_body_that_is_no_json(alice: APIClient, action) -> None:
    made = alice.post(URL, {"url": GOOD, "events": ["started"]}, format="json")
    hook = NotificationHook.objects.get(pk=made.json()["id"])

    r = alice.post(f"{URL}{hook.pk}/{action}/", data=b"[1, 2", content_type="application/json")

    assert r.status_code == 400 and r.json()["code"] == "parse_error", r.json()
    assert NotificationHook.objects.get(pk=hook.pk).secret == hook.secret


def test_rotate_secret_without_a_body_or_with_an_empty_one_still_rotates(alice: APIClient) -> None:
    made = alice.post(URL, {"url": GOOD, "events": ["started"]}, format="json")
    first = made.json()["secret"]

    bare = alice.post(f"{URL}{made.json()['id']}/rotate-secret/")
    empty = alice.post(f"{URL}{made.json()['id']}/rotate-secret/", {}, format="json")

    assert bare.status_code == 200 and empty.status_code == 200, (bare.json(), empty.json())
    assert len({first, bare.json()["secret"], empty.json()["secret"]}) == 3
