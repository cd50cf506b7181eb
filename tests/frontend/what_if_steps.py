"""Starting a what-if replay as the page does: the form's POST, then the GET it redirects to."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from django.test import Client


def start_replay(client: Client, **form: str) -> str:
    """POST the form (the Replay button) and answer the page it redirects to, which follows the replay."""
    response = client.post("/what-if/", form)
    assert response.status_code == 303, (response.status_code, response.content[:500])
    return str(response["Location"])


def key_of(location: str) -> str:
    return parse_qs(urlsplit(location).query)["key"][0]
