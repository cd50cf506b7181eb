"""A hook's host written as an address in another form, or as no host name at all, is refused
when the hook is created or changed, as the sender would refuse it at every POST.

Found by an audit: `https://0x7f000001/` (127.0.0.1 as the resolver reads it), `https://127.1/`,
`https://localhost./` and host names no resolver takes (`https://-bad-.com/`, `https://a..b/`)
were accepted at creation and only refused at send time, delivery after delivery."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from controlplane.models import NotificationHook
from controlplane.services import notifications

URL = "/api/v1/notification-hooks/"


@pytest.fixture(autouse=True)
def _no_private_networks(settings: Any) -> None:
    settings.QM = {**settings.QM, "WEBHOOK_ALLOWED_NETWORKS": [], "WEBHOOK_ALLOWED_HOSTS": []}


@pytest.mark.parametrize(("url", "address", "kind"), [
    ("https://0x7f000001/hook", "127.0.0.1", "loopback"),
    ("https://2130706433/hook", "127.0.0.1", "loopback"),
    ("https://0177.0.0.1/hook", "127.0.0.1", "loopback"),
    ("https://127.1/hook", "127.0.0.1", "loopback"),
    ("https://LOCALHOST/hook", "127.0.0.1", "loopback"),
    ("https://localhost./hook", "127.0.0.1", "loopback"),
    ("https://metrics.localhost/hook", "127.0.0.1", "loopback"),
    ("https://[::ffff:127.0.0.1]/hook", "127.0.0.1", "loopback"),
    ("https://0xa9fea9fe/latest", "169.254.169.254", "cloud instance-metadata"),
    ("https://10.1/hook", "10.0.0.1", "private"),
])
def test_an_address_written_another_way_is_refused_at_creation(alice: APIClient, url: str, address: str,
                                                               kind: str) -> None:
    response = alice.post(URL, {"url": url, "events": ["failed"]}, format="json")

    assert response.status_code == 400, response.content
    said = " ".join(response.json()["errors"]["url"])
    assert f"{address}, a {kind} address" in said or f"{address}, {kind}" in said \
        or f"{address} written another way, a {kind} address" in said \
        or f"{address} written another way, {kind}" in said, said
    assert not NotificationHook.objects.exists()
    # nothing was looked up: a numeric host is said as the address it is, a *.localhost name
    # as what it resolves to
    host = url.split("/")[2].lower().strip("[]")
    if "localhost" in host:
        assert f"{host} resolves to {address}," in said, said
    else:
        assert f"{host} is {address} written another way," in said, said


@pytest.mark.parametrize(("url", "words"), [
    ("https://-bad-.com/hook", "the label '-bad-'"),
    ("https://a..b/hook", "an empty label (two dots in a row)"),
    ("https://" + "a" * 64 + ".example.org/hook", f"the label '{'a' * 64}' is longer than 63 characters."),
    ("https://" + "exämple" * 12 + ".org/hook", "is longer than 63 characters once encoded (91)."),
    ("https://999.1.1.1/hook", "its last label is a number"),
    ("https://bad!host.example.org/hook", "the label 'bad!host'"),
])
def test_a_host_that_is_no_host_name_is_refused_at_creation(alice: APIClient, url: str, words: str) -> None:
    response = alice.post(URL, {"url": url, "events": ["failed"]}, format="json")

    assert response.status_code == 400, response.content
    assert words in " ".join(response.json()["errors"]["url"])
    assert not NotificationHook.objects.exists()


def test_a_change_of_url_is_judged_the_same(alice: APIClient) -> None:
    created = alice.post(URL, {"url": "https://hooks.example.org/x", "events": ["failed"]}, format="json")
    assert created.status_code == 201, created.content
    hook = created.json()["id"]

    response = alice.patch(f"{URL}{hook}/", {"url": "https://0x7f000001/x"}, format="json")

    assert response.status_code == 400 and "0x7f000001 is 127.0.0.1 written another way, a loopback address" in " ".join(
        response.json()["errors"]["url"])
    assert NotificationHook.objects.get(pk=hook).url == "https://hooks.example.org/x"


@pytest.mark.parametrize("url", ["https://hooks.slack.com/services/T0/B0/x", "https://exämple.org/hook",
                                 "https://build_01.ci.example.org/hook", "https://deadbeef.example.org/",
                                 "https://8.8.8.8/hook", "https://example.org./hook"])
def test_real_host_names_and_public_addresses_still_pass(url: str) -> None:
    assert notifications.url_problem(url, resolve_names=False) is None


def test_the_sender_refuses_the_same_urls_before_any_connection() -> None:
    refusal = notifications.sending_problem("https://0x7f000001/x")

    assert refusal is not None and refusal.rule == "url" and "127.0.0.1 written another way, a loopback address" in refusal.words
