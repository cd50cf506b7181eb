"""A hook's URL with a new line, a tab, a space or another control character in it is a 400 on
`url`, nothing written, on POST, PUT and PATCH; and a created hook's answer carries no Location
header naming the receiver.

Found by the API audit (4 Dec): `POST notification-hooks/ {"url": "https://example.com/\\r\\nX-Evil:
1", "events": ["started"]}` answered 500 (the HTML error page) *after* the hook was written: DRF's
create put the body's `url`, the receiver's address, in the answer's Location header, and Django
refused a header with a new line in it. A client retrying the 500 made another hook each time.
`PATCH` with the same URL answered 200 and stored it; "https://ex ample.com/h" (a space in the
host) was taken too, a hook that could never deliver. Every 201 also said `Location:
https://example.com/…`, the receiver, not the hook."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.models import Event, NotificationHook

pytestmark = pytest.mark.django_db
URL = "/api/v1/notification-hooks/"
GOOD = "https://hooks.slack.com/services/T0/B0/x"

UNSAFE = {
    "CRLF and a header": ("https://example.com/\r\nX-Evil: 1", "a carriage return"),
    "a new line": ("https://example.com/a\nb", "a new line"),
    "a tab": ("https://example.com/\tb", "a tab"),
    "a space in the host": ("https://ex ample.com/h", "a space"),
    "a space in the path": ("https://example.com/a b", "a space"),
    "an escape": ("https://example.com/\x1b[31m", "U+001B"),
    "a C1 control": ("https://example.com/a\x85b", "U+0085"),
}


def _refused_on_url(r: Any, words: str) -> None:
    assert r.status_code == 400, (r.status_code, r.content[:300])
    assert list(r.json()["errors"]) == ["url"], r.json()
    said = r.json()["errors"]["url"][0]
    assert "is not a URL" in said and words in said and "percent-encode" in said, said


@pytest.mark.parametrize(("url", "words"), UNSAFE.values(), ids=UNSAFE.keys())
def test_a_new_hook_with_such_a_url_is_refused_on_url_and_nothing_is_written(alice: APIClient, url, words) -> None:
    r = alice.post(URL, {"url": url, "events": ["started"]}, format="json")

    _refused_on_url(r, words)
    assert not NotificationHook.objects.exists()
    assert not Event.objects.filter(reason__startswith="NotificationHook").exists()


@pytest.mark.parametrize("method", ["patch", "put"])
@pytest.mark.parametrize(("url", "words"), UNSAFE.values(), ids=UNSAFE.keys())
def test_a_hook_changed_to_such_a_url_is_refused_and_keeps_its_own(alice: APIClient, method, url, words) -> None:
    made = alice.post(URL, {"url": GOOD, "events": ["started"]}, format="json")
    assert made.status_code == 201, made.json()

    whole = {"url": url, "events": ["started"], "team": None, "active": True}  # a PUT gives every field
    r = getattr(alice, method)(f"{URL}{made.json()['id']}/", whole, format="json")

    _refused_on_url(r, words)
    assert NotificationHook.objects.get(pk=made.json()["id"]).url == GOOD


def test_a_created_hook_answers_without_a_location_naming_its_receiver(alice: APIClient) -> None:
    r = alice.post(URL, {"url": GOOD, "events": ["started"]}, format="json")

    assert r.status_code == 201, r.json()
    assert r.get("Location") is None
    assert r.json()["url"] == GOOD


def test_surrounding_whitespace_is_still_trimmed_and_a_percent_encoded_space_taken(alice: APIClient) -> None:
    r = alice.post(URL, {"url": f"  {GOOD}%20x\n", "events": ["started"]}, format="json")

    assert r.status_code == 201, r.json()
    assert r.json()["url"] == f"{GOOD}%20x"


def test_the_refusal_shows_the_control_characters_escaped(alice: APIClient) -> None:
    r = alice.post(URL, {"url": "https://example.com/\r\nX-Evil: 1", "events": ["started"]}, format="json")

    said = r.json()["errors"]["url"][0]
    assert "'https://example.com/\\r\\nX-Evil: 1' is not a URL" in said and "\n" not in r.json()["detail"], said
