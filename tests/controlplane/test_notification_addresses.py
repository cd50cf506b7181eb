"""Where a webhook's POST may go: the address a hook's host resolves to, not only its name.

QM_WEBHOOK_ALLOWED_HOSTS checks the name as written; a name inside an allowed domain (or any
name, when the setting is empty) may resolve to 127.0.0.1, 169.254.169.254 or a private range
(server-side request forgery). The sender resolves the host at every POST, refuses a private,
loopback, link-local, metadata or other non-public address unless QM_WEBHOOK_ALLOWED_NETWORKS
holds it (CIDR), records the refusal on the delivery, and connects to the very address it checked
(a second DNS answer cannot redirect the POST). The receiver is the real one on 127.0.0.1
(tests/controlplane/webhook_receiver.py); the resolver is replaced only for the made-up names
of the rebinding and mixed-answer cases, which no real DNS serves on demand.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from controlplane.models import NotificationDelivery, NotificationHook
from controlplane.services import notifications
from tests.controlplane import factories as f
from tests.controlplane.loop_fixtures import (
    BOOTSTRAP,
    LoopFleet,
    bind,
    build_loop_fleet,
    make_job,
    register_node,
)
from tests.controlplane.webhook_receiver import LOOPBACK, Receiver, running

SECRET = "s3cret-of-the-hook"


@pytest.fixture(autouse=True)
def _settings(settings: Any) -> None:
    settings.QM = {**settings.QM, "AGENT_BOOTSTRAP_TOKEN": BOOTSTRAP, "WEBHOOK_TIMEOUT_S": 0.5,
                   "WEBHOOK_ALLOWED_NETWORKS": [], "WEBHOOK_ALLOWED_HOSTS": []}


@pytest.fixture
def fleet(db: Any) -> LoopFleet:
    return build_loop_fleet()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from running()


def allow(settings: Any, **qm: Any) -> None:
    settings.QM = {**settings.QM, **qm}


def started_job_hook(fleet: LoopFleet, url: str) -> NotificationHook:
    """A hook on `url` (written as is: the API's check of literal addresses is another test's),
    and a job of its user that starts, so one delivery is due."""
    user = f.make_user("alice", team=fleet.team)
    hook = NotificationHook.objects.create(user=user, url=url, events=["started"], secret=SECRET,
                                           created_at=timezone.now())
    node, _ = register_node("n-1")
    bind(make_job(fleet, name="train", submitter=user), {node: [0]})
    return hook


def send(after_s: float = 1) -> notifications.Sent:
    return notifications.deliver_due(now=timezone.now() + timedelta(seconds=after_s))


def port_of(receiver: Receiver) -> int:
    return int(urlsplit(receiver.url).port or 0)


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[list[str]]]:
    """Answers for made-up names: each lookup of a name takes the next answer (the last one
    repeats); every other name goes to the real resolver. `asked[name]` counts lookups."""
    answers: dict[str, list[list[str]]] = {}
    asked: dict[str, int] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, *args: Any, **kw: Any) -> Any:
        if host not in answers:
            return real(host, port, *args, **kw)
        n = asked[host] = asked.get(host, 0) + 1
        addresses = answers[host][min(n, len(answers[host])) - 1]
        if not addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, int(port or 0))) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    answers["__asked__"] = asked  # type: ignore[assignment]
    return answers


# ------------------------------------------------------------------------------- loopback


def test_a_loopback_receiver_is_refused_and_recorded_until_its_network_is_allowed(
        fleet: LoopFleet, receiver: Receiver, settings: Any) -> None:
    hook = started_job_hook(fleet, receiver.url)

    refused = send()

    row = NotificationDelivery.objects.get(hook=hook)
    assert receiver.received == [] and refused.failed == 1 and refused.delivered == 0
    assert row.last_error.startswith("not sent: 127.0.0.1 is a loopback address, which webhooks may not reach here "
                                     "(server-side request forgery); an admin may allow its network in "
                                     "QM_WEBHOOK_ALLOWED_NETWORKS"), row.last_error
    assert row.delivered_at is None and row.next_attempt_at is not None and row.attempts == 1  # retried
    hook.refresh_from_db()
    assert "loopback address" in hook.last_status and hook.consecutive_failures == 1

    allow(settings, WEBHOOK_ALLOWED_NETWORKS=[LOOPBACK])
    sent = send(after_s=notifications.backoff_s(1) + 1)

    row.refresh_from_db()
    assert sent.delivered == 1 and len(receiver.received) == 1
    assert row.delivered_at is not None and row.last_error == "" and row.attempts == 2


def test_a_name_that_resolves_to_loopback_is_refused_even_when_the_name_is_an_allowed_host(
        fleet: LoopFleet, receiver: Receiver, settings: Any) -> None:
    url = f"http://localhost:{port_of(receiver)}/hook"
    allow(settings, WEBHOOK_ALLOWED_HOSTS=["localhost"])
    # Plain http by name is resolved when the hook is saved (it must reach an allowed network)...
    assert "localhost resolves to 127.0.0.1, a loopback address" in str(notifications.url_problem(url))
    # ... and where an admin allows http anywhere (a closed network) too: `localhost` means
    # loopback without any lookup (RFC 6761), so creating the hook judges it as written. A row
    # saved before that rule is still resolved, and refused, at every POST.
    allow(settings, WEBHOOK_ALLOW_HTTP=True)
    assert "localhost resolves to 127.0.0.1, a loopback address" in str(notifications.url_problem(url))
    hook = started_job_hook(fleet, url)

    send()

    row = NotificationDelivery.objects.get(hook=hook)
    assert receiver.received == []
    assert row.last_error.startswith("not sent: localhost resolves to ")
    assert ", a loopback address, which webhooks may not reach here" in row.last_error

    # Allowed: the POST goes to the checked address, with the name kept in the Host header.
    allow(settings, WEBHOOK_ALLOWED_NETWORKS=[LOOPBACK, "::1/128"])
    send(after_s=notifications.backoff_s(1) + 1)

    (got,) = receiver.wait_for(1)
    assert got.headers["Host"] == f"localhost:{port_of(receiver)}"
    assert NotificationDelivery.objects.get(hook=hook).delivered_at is not None


# ----------------------------------------------------------------- metadata and private ranges


@pytest.mark.parametrize(("url", "words"), [
    ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a cloud instance-metadata address"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "fd00:ec2::254 is a cloud instance-metadata address"),
    ("http://169.254.10.1/", "169.254.10.1 is a link-local address"),
    ("http://10.20.30.40:8080/hook", "10.20.30.40 is a private address"),
    ("https://192.168.1.1/hook", "192.168.1.1 is a private address"),
    ("http://172.16.0.1/hook", "172.16.0.1 is a private address"),
    ("http://100.64.0.1/hook", "100.64.0.1 is a non-public (reserved or shared) address"),
    ("http://0.0.0.0:80/hook", "0.0.0.0 is an unspecified address"),
    ("http://[::1]:80/hook", "::1 is a loopback address"),
    ("http://[::ffff:127.0.0.1]:80/hook", "::ffff:127.0.0.1 is 127.0.0.1 written another way, a loopback address"),
    ("http://[fe80::1]/hook", "fe80::1 is a link-local address"),
    # a zone is no part of a network the setting takes: the suggestion leaves it out
    ("http://[fe80::1%25eth0]/hook", "QM_WEBHOOK_ALLOWED_NETWORKS (e.g. fe80::1/128 or"),
])
def test_metadata_private_and_other_non_public_addresses_are_refused_without_a_connection(
        url: str, words: str) -> None:
    assert words in str(notifications.url_problem(url))  # when the hook is created or changed: a 400 on url

    outcome = notifications.post(url, SECRET, {"event": "started"}, event="started", delivery_id=1)

    assert not outcome.ok and outcome.status is None
    assert outcome.words.startswith("not sent: ") and words in outcome.words


def test_allowed_networks_in_cidr_let_only_their_addresses_through(settings: Any) -> None:
    allow(settings, WEBHOOK_ALLOWED_NETWORKS=["10.20.0.0/16", "fd12::/64", "not-a-network"])

    assert notifications.url_problem("http://10.20.30.40/hook") is None
    assert notifications.url_problem("http://[fd12::7]/hook") is None
    assert "10.21.0.1 is a private address" in str(notifications.url_problem("http://10.21.0.1/hook"))
    assert "169.254.169.254 is a cloud instance-metadata" in str(notifications.url_problem("http://169.254.169.254/"))
    assert notifications.url_problem("https://93.184.216.34/hook") is None  # public: no setting needed


def test_a_setting_entry_that_is_no_network_allows_nothing(settings: Any) -> None:
    allow(settings, WEBHOOK_ALLOWED_NETWORKS="not-a-network, 127.0.0.1/40")

    assert notifications.allowed_networks() == []
    assert "loopback address" in str(notifications.url_problem("http://127.0.0.1:9/hook"))


# ------------------------------------------------------------------------ what DNS answers


def test_the_connection_goes_to_the_checked_address_not_to_a_second_dns_answer(
        receiver: Receiver, resolver: dict[str, Any], settings: Any) -> None:
    """DNS rebinding: the name answers the allowed loopback receiver to the check, then the
    metadata address. Pinned, the POST reaches the receiver and the name is looked up once."""
    allow(settings, WEBHOOK_ALLOWED_NETWORKS=[LOOPBACK])
    resolver["rebind.example"] = [["127.0.0.1"], ["169.254.169.254"]]
    url = f"http://rebind.example:{port_of(receiver)}/hook"

    outcome = notifications.post(url, SECRET, {"event": "started"}, event="started", delivery_id=7)

    assert outcome.ok, outcome.words
    (got,) = receiver.received
    assert got.headers["Host"] == f"rebind.example:{port_of(receiver)}"
    assert got.headers["X-Quartermaster-Signature"] == notifications.sign(SECRET, got.body)
    assert resolver["__asked__"]["rebind.example"] == 1


def test_a_name_with_one_refused_address_among_public_ones_is_refused(
        receiver: Receiver, resolver: dict[str, Any]) -> None:
    resolver["mixed.example"] = [["93.184.216.34", "127.0.0.1"]]

    outcome = notifications.post(f"http://mixed.example:{port_of(receiver)}/hook", SECRET, {}, event="started",
                                 delivery_id=None)

    assert not outcome.ok and receiver.received == []
    assert "mixed.example resolves to 127.0.0.1, a loopback address" in outcome.words


def test_a_name_that_does_not_resolve_is_not_sent_and_says_so(resolver: dict[str, Any]) -> None:
    resolver["gone.example"] = [[]]

    outcome = notifications.post("https://gone.example/hook", SECRET, {}, event="started", delivery_id=None)

    assert not outcome.ok and outcome.words.startswith("not sent: could not resolve gone.example (")


# ------------------------------------------------------------------------ https, pinned


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for pinned.example (openssl, as on Debian)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a test certificate")
    where = tmp_path_factory.mktemp("tls")
    cert, key = str(where / "cert.pem"), str(where / "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=pinned.example", "-addext", "subjectAltName=DNS:pinned.example"],
                   check=True, capture_output=True)
    return cert, key


@pytest.fixture
def tls_receiver(certificate: tuple[str, str]) -> Iterator[Receiver]:
    yield from running(certfile=certificate[0], keyfile=certificate[1])


def test_an_https_post_pinned_to_the_checked_address_still_checks_the_certificate_for_the_name(
        tls_receiver: Receiver, certificate: tuple[str, str], resolver: dict[str, Any], settings: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection goes to 127.0.0.1, yet TLS is for the URL's name: SNI and the certificate's
    name are pinned.example's, and a certificate for another name is refused."""
    allow(settings, WEBHOOK_ALLOWED_NETWORKS=[LOOPBACK])
    resolver["pinned.example"] = [["127.0.0.1"]]
    resolver["other.example"] = [["127.0.0.1"]]
    port = port_of(tls_receiver)

    untrusted = notifications.post(f"https://pinned.example:{port}/hook", SECRET, {}, event="started",
                                   delivery_id=None)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", certificate[0])  # the site's own CA, as requests reads it
    delivered = notifications.post(f"https://pinned.example:{port}/hook", SECRET, {"event": "started"},
                                   event="started", delivery_id=3)
    wrong_name = notifications.post(f"https://other.example:{port}/hook", SECRET, {}, event="started",
                                    delivery_id=None)

    assert not untrusted.ok and untrusted.words.startswith("TLS failed: ") and "CERTIFICATE_VERIFY_FAILED" in \
        untrusted.words
    assert delivered.ok, delivered.words
    assert not wrong_name.ok and wrong_name.words.startswith("TLS failed: ")
    assert "pinned.example" in wrong_name.words or "match" in wrong_name.words.lower()
    (got,) = tls_receiver.received
    assert got.headers["Host"] == f"pinned.example:{port}" and got.json() == {"event": "started"}
    assert got.headers["X-Quartermaster-Signature"] == notifications.sign(SECRET, got.body)


# ----------------------------------------------------------- plain http: only to an internal relay


HTTP_RULE = "a plain http URL sends each notification unencrypted"


def test_plain_http_to_a_public_address_is_refused_and_https_to_it_is_not(settings: Any) -> None:
    problem = str(notifications.url_problem("http://93.184.216.34/hook"))

    assert problem.startswith("93.184.216.34 is not inside QM_WEBHOOK_ALLOWED_NETWORKS: " + HTTP_RULE), problem
    assert "QM_WEBHOOK_ALLOW_HTTP" in problem and problem.endswith("Use https://.")
    assert notifications.url_problem("https://93.184.216.34/hook") is None
    allow(settings, WEBHOOK_ALLOW_HTTP=True)  # an admin's choice for a closed network
    assert notifications.url_problem("http://93.184.216.34/hook") is None


def test_plain_http_is_allowed_to_an_address_inside_the_allowed_networks(settings: Any) -> None:
    allow(settings, WEBHOOK_ALLOWED_NETWORKS=["10.20.0.0/16"])

    assert notifications.url_problem("http://10.20.30.40:8080/relay") is None
    # The SSRF rule speaks first for an address outside them: the more serious refusal.
    assert "10.21.0.1 is a private address" in str(notifications.url_problem("http://10.21.0.1/relay"))


def test_plain_http_by_name_is_resolved_when_saved_and_must_land_inside_the_allowed_networks(
        resolver: dict[str, Any], settings: Any) -> None:
    allow(settings, WEBHOOK_ALLOWED_NETWORKS=["10.20.0.0/16"])
    resolver["relay.corp.example"] = [["10.20.0.5"]]
    resolver["chat.public.example"] = [["93.184.216.34"]]
    resolver["split.corp.example"] = [["10.20.0.6", "93.184.216.35"]]
    resolver["gone.example"] = [[]]

    assert notifications.url_problem("http://relay.corp.example/hook") is None
    assert str(notifications.url_problem("http://chat.public.example/hook")).startswith(
        f"chat.public.example (93.184.216.34) is not inside QM_WEBHOOK_ALLOWED_NETWORKS: {HTTP_RULE}")
    assert "split.corp.example (93.184.216.35) is not inside" in str(
        notifications.url_problem("http://split.corp.example/hook"))
    gone = str(notifications.url_problem("http://gone.example/hook"))
    assert gone.startswith("could not resolve gone.example (") and HTTP_RULE in gone
    # https by name is never resolved when saved: its addresses are checked at every POST.
    assert notifications.url_problem("https://chat.public.example/hook") is None
    assert resolver["__asked__"].get("chat.public.example") == 1


def test_an_http_name_that_later_resolves_outside_the_networks_is_not_sent_in_clear(
        receiver: Receiver, resolver: dict[str, Any], settings: Any) -> None:
    """Saved while it named the relay on loopback; then its DNS answer moved to a public address:
    the sender refuses the POST (nothing leaves in clear), and says why."""
    allow(settings, WEBHOOK_ALLOWED_NETWORKS=[LOOPBACK])
    resolver["relay.example"] = [["127.0.0.1"], ["127.0.0.1"], ["93.184.216.34"]]
    url = f"http://relay.example:{port_of(receiver)}/hook"
    assert notifications.url_problem(url) is None

    sent = notifications.post(url, SECRET, {"event": "started"}, event="started", delivery_id=8)
    moved = notifications.post(url, SECRET, {"event": "started"}, event="started", delivery_id=9)

    assert sent.ok, sent.words
    (got,) = receiver.received
    assert got.headers["X-Quartermaster-Signature"] == notifications.sign(SECRET, got.body)
    assert not moved.ok and moved.status is None
    assert moved.words.startswith("not sent: relay.example (93.184.216.34) is not inside "
                                  f"QM_WEBHOOK_ALLOWED_NETWORKS: {HTTP_RULE}"), moved.words


def test_an_older_http_hook_to_a_public_host_stops_delivering_and_each_delivery_says_why(
        fleet: LoopFleet, resolver: dict[str, Any]) -> None:
    """A hook saved before the rule, on plain http to a public name: its deliveries are refused
    (not sent) and retried, each saying why, until its owner changes the URL to https."""
    resolver["legacy.example"] = [["93.184.216.34"]]
    hook = started_job_hook(fleet, "http://legacy.example/hook")

    send()

    row = NotificationDelivery.objects.get(hook=hook)
    assert row.last_error.startswith("not sent: legacy.example (93.184.216.34) is not inside "
                                     "QM_WEBHOOK_ALLOWED_NETWORKS"), row.last_error
    assert row.next_attempt_at is not None and row.delivered_at is None
