"""Job notifications by webhook: Slurm's --mail-type, delivered as HTTP POSTs of JSON.

A user subscribes a URL (NotificationHook) to some of NotifyOn's events, for their own jobs or
for every job of one of their teams. The rest happens in two places:

1. `enqueue`, called for every batch of events `Event.objects.create` and `bulk_create` write
   (models/events.py announces it, controlplane/signals.py calls this), so in the very
   transaction that records a job's event: it maps each job event to what a hook may subscribe
   to (`notify_on`), finds the hooks that want it in ONE query for the whole batch (none for a
   batch without such an event: a job's waiting reason, an allocation, a node; before it, a short
   read of whether any hook is active at all, which ends there when none is), and writes one
   NotificationDelivery row per (hook, event) in one more. The outbox commits with the event or
   not at all; after the commit the sender is woken (`triggers.request_notifications`).
2. `deliver_due`, run by the Celery task `qm.notify` (beat every NOTIFY_INTERVAL_S, and woken on
   commit) on the default queue, never the loop's, and by its own thread in the embedded demo:
   it claims the due rows (FOR UPDATE SKIP LOCKED, then pushes their due time past the claim,
   so two senders never POST the same row and a sender that dies mid-way only delays them),
   POSTs each hook's rows in order on a small thread pool (5 s connect and read timeouts), and
   writes the outcomes. A delivery goes to the URL the hook has when it is sent: right before
   each POST the hook's URL and secret are read as committed (`_send_in_order`), so a change
   made after a row was queued or claimed applies to it, and a hook paused or deleted meanwhile
   sends no more. A change committed while one of the hook's POSTs is already on the wire does
   not stop that POST: it may still reach the old URL, once (a hook has one POST on the wire at
   a time); a failure there is tried again at once at the new URL (`_record`'s `moved`). A row
   never overtakes an older row of its hook that waits for a retry. A failed POST is retried
   after 30 s, 1 min, 2 min, ... up to 1 h, at most WEBHOOK_MAX_ATTEMPTS times (10: about 3
   hours), then given up and said so; the hook's other rows due in that round wait with it (a
   dead receiver costs one timeout a round, not one per row). A hook whose last
   WEBHOOK_FAILING_AFTER attempts failed reads as failing on the API.

Each POST carries `X-Quartermaster-Signature: sha256=<hex HMAC-SHA256 of the body with the
hook's secret>`, `X-Quartermaster-Event` and `X-Quartermaster-Delivery` (the row's id, the same
on every retry, for receivers to drop repeats). Redirects are not followed. The host is resolved
at every POST and the connection pinned to the address checked: a private, loopback,
link-local or metadata address is refused unless QM_WEBHOOK_ALLOWED_NETWORKS holds it
(`address_problem`), and the refusal is the delivery's error.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import re
import secrets
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import certifi
import structlog
import urllib3
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from controlplane import triggers
from controlplane.choices import EventKind, JobState, NotifyOn, Role
from controlplane.models.events import actor_name
from controlplane.services.given_once import repeated_problem

if TYPE_CHECKING:
    from controlplane.models import Event, NotificationDelivery, NotificationHook
    from controlplane.services import job_mentions

log = structlog.get_logger(__name__)

TEST_EVENT = "test"
USER_AGENT = "Quartermaster-Webhook/1"
SIGNATURE_HEADER = "X-Quartermaster-Signature"
#: How long a claimed row stays out of other senders' reach (a sender that dies holds it so long).
CLAIM_S = 120.0
BACKOFF_FIRST_S = 30.0
BACKOFF_MAX_S = 3600.0
SENDER_THREADS = 8

_FINISHED = {JobState.SUCCEEDED.value: NotifyOn.SUCCEEDED, JobState.FAILED.value: NotifyOn.FAILED,
             JobState.TIMED_OUT.value: NotifyOn.TIMED_OUT}
_FINISHED_REASONS = {"Succeeded": JobState.SUCCEEDED.value, "Failed": JobState.FAILED.value,
                     "TimedOut": JobState.TIMED_OUT.value, "Timedout": JobState.TIMED_OUT.value}
_REQUEUES = {EventKind.JOB_PREEMPTED.value, EventKind.JOB_REQUEUED.value, EventKind.JOB_RESIZED.value}
_STATE_AFTER = {NotifyOn.STARTED: JobState.RUNNING.value, NotifyOn.SUCCEEDED: JobState.SUCCEEDED.value,
                NotifyOn.FAILED: JobState.FAILED.value, NotifyOn.TIMED_OUT: JobState.TIMED_OUT.value,
                NotifyOn.REQUEUED: JobState.PENDING.value, NotifyOn.UNSCHEDULABLE: JobState.UNSCHEDULABLE.value}


def _qm(name: str, default: Any) -> Any:
    return settings.QM.get(name, default)


def timeout_s() -> float:
    return float(_qm("WEBHOOK_TIMEOUT_S", 5.0))


def max_attempts() -> int:
    return int(_qm("WEBHOOK_MAX_ATTEMPTS", 10))


def failing_after() -> int:
    return int(_qm("WEBHOOK_FAILING_AFTER", 5))


def new_secret() -> str:
    return secrets.token_urlsafe(32)


# ------------------------------------------------------------------------------ which events


def notify_on(event: Event) -> str | None:
    """What a hook subscribes to for this job event, or None (not notified).

    started: the job was bound to its GPUs (Slurm's BEGIN). succeeded, failed, timed_out: its
    `job.finished` (a cancel's finish is not notified again: its `job.cancelled` said it, with
    who). cancelled: `job.cancelled` (a user, an admin, or a dependency that can never be met).
    preempted: the preemption notice (`job.preempting` with reason `Preempted`, the engine's
    sentence with the grace period and the GPU-hours it will lose). Any other stop's notice, a
    `job.stopping` (a resize, a requeue someone asked for, a gang member's exit), is not
    notified, nor an old `job.preempting` of such a stop (stored before migration 0032, with
    its reason: `Requeued`, `Resized`, `GangMemberExited` …).
    requeued: requeued after a preemption, a resize, a node that failed under it, or at
    someone's request (`POST jobs/{id}/requeue/`, its `job.requeued` once its processes are
    gone). unschedulable: the engine found it can never run. borrowed: a running job now counts
    as borrowed (`job.borrowing` with reason `Borrowing`: its team's quota was lowered or its
    team left its cohort while it ran), so a lender reclaiming its GPUs preempts it first; the
    mark is never cleared, and an old `WithinQuota` event (stored before it stopped being
    cleared) is not notified."""
    kind = event.kind
    if kind == EventKind.JOB_BOUND:
        return NotifyOn.STARTED.value
    if kind == EventKind.JOB_FINISHED:
        data = event.data if isinstance(event.data, dict) else {}
        state = data.get("state") or _FINISHED_REASONS.get(event.reason)
        found = _FINISHED.get(str(state))
        return found.value if found is not None else None
    if kind == EventKind.JOB_CANCELLED:
        return NotifyOn.CANCELLED.value
    if kind == EventKind.JOB_PREEMPTING:  # (job.stopping: never a preemption, not notified)
        return NotifyOn.PREEMPTED.value if event.reason == "Preempted" else None
    if kind in _REQUEUES:
        return NotifyOn.REQUEUED.value
    if kind == EventKind.JOB_UNSCHEDULABLE:
        return NotifyOn.UNSCHEDULABLE.value
    if kind == EventKind.JOB_BORROWING:
        return NotifyOn.BORROWED.value if event.reason == "Borrowing" else None
    return None


# ---------------------------------------------------------------------------------- enqueue


@dataclass(frozen=True)
class _Match:
    hook_id: int
    events: frozenset[str]
    job_name: str
    job_state: str
    team: str


def enqueue(events: Sequence[Event]) -> int:
    """Queue the deliveries these just-written events owe (see the module's docstring, step 1).
    Runs in the caller's transaction. Returns how many rows it queued."""
    wanted = [(e, on) for e in events if e.job_id is not None and (on := notify_on(e)) is not None]
    if not wanted:
        return 0
    matches = _matching_hooks(sorted({int(e.job_id) for e, _ in wanted}))  # type: ignore[arg-type]
    if not matches:
        return 0
    from controlplane.models import NotificationDelivery

    base = public_url()
    # one reader per team for the whole batch: the teams of the jobs its messages name are
    # looked up once, not once per delivery
    readers: dict[int | None, job_mentions.JobMentions] = {}
    rows = []
    for event, on in wanted:
        for match in matches.get(int(event.job_id), ()):  # type: ignore[arg-type]
            if on in match.events:
                rows.append(NotificationDelivery(
                    hook_id=match.hook_id, job_id=event.job_id, event=on, created_at=event.created_at,
                    next_attempt_at=event.created_at, payload=_payload(event, on, match, base, readers),
                ))
    if not rows:
        return 0
    NotificationDelivery.objects.bulk_create(rows, batch_size=2000)
    transaction.on_commit(_wake_sender)
    return len(rows)


def _matching_hooks(job_ids: list[int]) -> dict[int, list[_Match]]:
    """The active hooks that follow each of these jobs: their submitter's own hooks, and the
    hooks on their team of users who may still read it (members who are not finance, admins).
    Two queries (on SQLite one more per 500 jobs), one when no hook is active: every job's end
    comes here, and most fleets have few hooks or none. The join below costs ~3 ms to plan and
    run even over an empty hook table (1,000 /bin/true jobs through 64 agents: 0.75 s of
    PostgreSQL in 250 exit reports); a read of the hook table alone costs a tenth of it."""
    from controlplane.models import Job, Membership, NotificationHook, Team

    if not NotificationHook.objects.filter(active=True).exists():
        return {}
    user_table = get_user_model()._meta.db_table
    sql = (
        f"SELECT h.id, h.events, j.id, j.name, j.state, t.name FROM {NotificationHook._meta.db_table} h "
        f"JOIN {user_table} u ON u.id = h.user_id "
        f"JOIN {Job._meta.db_table} j ON ((h.team_id IS NULL AND j.submitter_id = h.user_id) OR j.team_id = h.team_id) "
        f"JOIN {Team._meta.db_table} t ON t.id = j.team_id "
        "WHERE h.active AND u.is_active AND j.id {ids} AND (h.team_id IS NULL OR u.is_superuser OR EXISTS ("
        f"SELECT 1 FROM {Membership._meta.db_table} m WHERE m.user_id = h.user_id "
        "AND ((m.team_id = h.team_id AND m.role <> %s) OR m.role = %s)))"
    )
    rows: list[tuple[Any, ...]] = []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(sql.replace("{ids}", "= ANY(%s)"), [job_ids, Role.FINANCE.value, Role.ADMIN.value])
            rows.extend(cursor.fetchall())
        else:
            for at in range(0, len(job_ids), 500):
                chunk = job_ids[at:at + 500]
                cursor.execute(sql.replace("{ids}", f"IN ({', '.join(['%s'] * len(chunk))})"),
                               [*chunk, Role.FINANCE.value, Role.ADMIN.value])
                rows.extend(cursor.fetchall())
    found: dict[int, list[_Match]] = defaultdict(list)
    seen: set[tuple[int, int]] = set()
    for hook_id, kinds, job_id, name, state, team in rows:
        if (hook_id, job_id) in seen:
            continue
        seen.add((hook_id, job_id))
        kinds = json.loads(kinds) if isinstance(kinds, str | bytes) else kinds
        found[job_id].append(_Match(hook_id, frozenset(map(str, kinds or ())), name, state, team))
    return found


def public_url() -> str:
    """The web UI's address as people reach it (QM_PUBLIC_URL), for the job links; "" when not
    set (the links are then paths, /jobs/42/)."""
    return str(_qm("PUBLIC_URL", "") or "").rstrip("/")


def _payload(event: Event, on: str, match: _Match, base: str,
             readers: dict[int | None, job_mentions.JobMentions]) -> dict[str, Any]:
    data = event.data if isinstance(event.data, dict) else {}
    label = NotifyOn(on).label.removeprefix("Job ")
    if on == NotifyOn.CANCELLED:
        label = f"{label} by {actor_name(event.actor)}"
    state = data.get("state") or _STATE_AFTER.get(NotifyOn(on), match.job_state)
    url = f"{base}/jobs/{event.job_id}/"
    from controlplane.services import job_mentions

    # the delivery leaves the product: other teams' jobs by their team, as the job's team reads them
    reader = readers.setdefault(event.team_id, job_mentions.to_team(event.team_id))
    message = reader.say(event.message) or label
    # an event whose sentence opens with the label ("Now counts as borrowed: team ml holds …")
    # is not said twice in the one line
    said = message[len(label) + 2:] if message.lower().startswith(f"{label.lower()}: ") else message
    payload: dict[str, Any] = {
        "text": f"Job {event.job_id} {match.job_name} ({match.team}) {label}: {said} {url}",
        "event": on,
        "job_id": event.job_id,
        "job_name": match.job_name,
        "team": match.team,
        "state": state,
        "message": message,
        "reason": event.reason,
        "actor": event.actor,
        "url": url,
        "at": event.created_at.isoformat(),
    }
    if on in (NotifyOn.SUCCEEDED, NotifyOn.FAILED, NotifyOn.TIMED_OUT):
        payload["exit_code"] = data.get("exit_code")
    if on == NotifyOn.PREEMPTED:
        payload["grace_period_s"] = data.get("grace_period_s")
        payload["expected_lost_gpu_hours"] = data.get("expected_lost_gpu_hours")
    if on == NotifyOn.REQUEUED and "lost_gpu_seconds" in data:
        payload["lost_gpu_hours"] = round(float(data["lost_gpu_seconds"]) / 3600, 4)
    return payload


def _wake_sender() -> None:
    triggers.request_notifications()


# -------------------------------------------------------------------------------- the rules


class Refused(ValueError):
    """A hook's URL, events or team refused: `errors` maps each field to its sentence."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


def allowed_hosts() -> list[str]:
    raw = _qm("WEBHOOK_ALLOWED_HOSTS", [])
    if isinstance(raw, str):
        raw = raw.split(",")
    return [h.strip().lower() for h in raw if h and h.strip()]


def host_allowed(host: str, allowed: Sequence[str]) -> bool:
    """Any host when `allowed` is empty; else an exact name, or a subdomain of `.example.com`
    (also written `*.example.com`)."""
    if not allowed:
        return True
    host = host.lower().rstrip(".")
    for pattern in allowed:
        suffix = pattern[1:] if pattern.startswith("*.") else pattern
        if host == pattern or (suffix.startswith(".") and (host.endswith(suffix) or host == suffix[1:])):
            return True
    return False


# Whitespace and control characters (a new line would end the request line of every POST to
# it; a space is no part of a host): a URL carries them percent-encoded, if at all.
_URL_UNSAFE = re.compile(r"[\x00-\x20\x7f-\x9f\s]")


#: What a resolver takes for an IPv4 address written as numbers (inet_aton's forms: 2130706433,
#: 0x7f000001, 0177.0.0.1, 127.1), not a name to look up.
_NUMERIC_HOST = re.compile(r"^[0-9a-fx.]+\Z")
#: One label of a host name: letters, digits, hyphens (not first or last), up to 63; the
#: underscore some internal names carry is let through, as resolvers do.
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)\Z")  # \Z: "$" lets a trailing newline through


def written_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a URL's host means without any lookup, however it is written; None for a
    name. The resolver reads 0x7f000001 and 127.1 as 127.0.0.1, and every *.localhost name as
    loopback (RFC 6761), so creating a hook judged them as names to resolve later while the
    sender then refused them at every POST."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return ipaddress.ip_address("127.0.0.1")
    if _NUMERIC_HOST.match(name) and any(c.isdigit() for c in name):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return None
    return None


def _idna_problem(host: str) -> str:
    """Which label of `host` has no IDNA form: empty (two dots in a row) or too long once
    encoded (the codec says only "label empty or too long")."""
    labels = host[:-1].split(".") if host.endswith(".") else host.split(".")
    for label in labels:
        if label == "":
            return "an empty label (two dots in a row)"
        length = len(label) if label.isascii() else len("xn--") + len(label.lower().encode("punycode"))
        if length > 63:
            once = "" if label.isascii() else f" once encoded ({length})"
            return f"the label '{label[:70]}' is longer than 63 characters{once}"
        try:
            label.encode("idna")
        except UnicodeError:
            return f"the label '{label[:70]}' has no IDNA form"
    return "it has no IDNA form"


def host_name_problem(host: str) -> str | None:
    """Why `host` can be no host's name, in words; None when it can (whether it resolves is
    the sender's to find out). Names in other scripts are judged in their IDNA form."""
    try:
        ascii_name = host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return f"{host[:100]} is not a host name: {_idna_problem(host)}."
    labels = ascii_name[:-1].split(".") if ascii_name.endswith(".") else ascii_name.split(".")
    wrong = next((label for label in labels if not _LABEL.match(label)), None)
    if wrong is not None:
        said = "an empty label (two dots in a row)" if wrong == "" else f"the label '{wrong[:70]}'"
        return (f"{host[:100]} is not a host name: {said} is not letters, digits and hyphens (not first or last), "
                "1 to 63 of them.")
    if len(ascii_name.rstrip(".")) > 253:
        return f"{host[:100]}… is not a host name: longer than 253 characters."
    if labels[-1].isdigit():
        return f"{host[:100]} is not a host name or an address: its last label is a number, and it is no IPv4 address."
    return None


def _unsafe_said(ch: str) -> str:
    return {" ": "a space", "\n": "a new line", "\r": "a carriage return", "\t": "a tab"}.get(
        ch, f"the character U+{ord(ch):04X}")


def url_problem(url: str, *, resolve_names: bool = True) -> str | None:
    """Why this URL cannot be a hook's, in words; None when it can.

    A plain http URL must reach QM_WEBHOOK_ALLOWED_NETWORKS (`http_problem`): an address is
    checked as written, a name is resolved here (`resolve_names`; the sender, which resolves it
    itself at every POST, checks the addresses it connects to instead)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is no number
    except ValueError:
        return f"'{url[:100]}' is not a URL: give http(s)://host/path."
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"'{url[:100]}' is not an http or https URL: give http(s)://host/path (e.g. a Slack incoming webhook)."
    odd = _URL_UNSAFE.search(url)
    if odd is not None:
        shown = _URL_UNSAFE.sub(lambda m: m.group() if m.group() == " " else repr(m.group())[1:-1], url[:100])
        return (f"'{shown}' is not a URL: it contains {_unsafe_said(odd.group())}, which a URL never holds; "
                "percent-encode it (a space is %20) or leave it out.")
    if parts.username or parts.password:
        return "a URL with a user name or password in it would show them to everyone who reads the hook: " \
               "put the credential in the path or query as the receiver allows, or use the signature."
    allowed = allowed_hosts()
    if not host_allowed(parts.hostname, allowed):
        return (f"{parts.hostname} is not among the hosts webhooks may reach here (QM_WEBHOOK_ALLOWED_HOSTS: "
                f"{', '.join(allowed)}); ask an admin.")
    literal = written_address(parts.hostname)
    if literal is None:
        bad = host_name_problem(parts.hostname)
        if bad is not None:
            return bad
        # A name: its addresses are checked when it is resolved, at every POST. Plain http
        # must reach an allowed network: that needs its addresses now.
        if parts.scheme != "http" or not resolve_names or http_allowed_anywhere():
            return None
        port = parts.port or 80
        try:
            addresses = resolve(parts.hostname, port)
        except (OSError, UnicodeError) as error:
            return (f"could not resolve {parts.hostname} ({_short(error)}): {_HTTP_WHY}, so http may only reach a "
                    f"host inside {_NETWORKS_SETTING} (an internal relay), or any host if an admin sets "
                    f"{_HTTP_SETTING}. Use https, or a host that resolves.")
        for address in addresses:
            refused = address_problem(parts.hostname, address)
            if refused is not None:
                return refused
        return http_problem(parts.hostname, addresses)
    return address_problem(parts.hostname, literal) or (
        http_problem(parts.hostname, [literal]) if parts.scheme == "http" else None)


# ------------------------------------------------------------------- where a POST may go

#: The cloud providers' instance-metadata addresses (AWS, GCP, Azure, OpenStack; AWS's IPv6 one).
METADATA_ADDRESSES = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})
_NETWORKS_SETTING = "QM_WEBHOOK_ALLOWED_NETWORKS"


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """QM_WEBHOOK_ALLOWED_NETWORKS: the non-public networks a hook may reach anyway, in CIDR
    (`10.20.0.0/16`, `127.0.0.1/32`, `fd12::/64`). An entry that is no network is left out (and
    logged): the setting can only allow less by mistake, never more."""
    raw = _qm("WEBHOOK_ALLOWED_NETWORKS", [])
    if isinstance(raw, str):
        raw = raw.split(",")
    networks = []
    for entry in raw:
        entry = str(entry).strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            log.error("notifications.bad_allowed_network", setting=_NETWORKS_SETTING, entry=entry[:60],
                      detail="not an address or network in CIDR (10.20.0.0/16): left out")
    return networks


def _address_kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """What makes an address one a webhook may not reach by default; None for a public one."""
    if address in METADATA_ADDRESSES:
        return "a cloud instance-metadata"
    if address.is_loopback:
        return "a loopback"
    if address.is_link_local:
        return "a link-local"
    if address.is_unspecified:
        return "an unspecified"
    if address.is_multicast:
        return "a multicast"
    if address.is_private:
        return "a private"
    if not address.is_global:
        return "a non-public (reserved or shared)"
    return None


def address_problem(host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why a POST may not go to `address` (what `host` names), in words; None when it may.

    Public addresses may; private, loopback, link-local (the cloud metadata service's
    169.254.169.254 among them), unspecified, multicast and other non-public ones only when
    QM_WEBHOOK_ALLOWED_NETWORKS holds them. An IPv4 address written as IPv6 (::ffff:127.0.0.1)
    is judged as the IPv4 one."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    kind = _address_kind(address)
    if kind is None or any(address in network for network in allowed_networks()):
        return None
    # the network suggested is the address without an IPv6 zone (fe80::1%eth0), which no setting takes
    bare = ipaddress.ip_address(str(address).split("%", 1)[0])
    return (f"{_subject(host, address)} {kind} address, which webhooks may not reach here (server-side request "
            f"forgery); an admin may allow its network in {_NETWORKS_SETTING} (e.g. {bare}/{bare.max_prefixlen} "
            "or 10.0.0.0/8).")


def _subject(host: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    """How the refusal names what `host` means: the address itself, an address written another
    way (0x7f000001, 127.1, ::ffff:127.0.0.1: nothing was looked up, so it does not "resolve"),
    or a name and what it resolves to."""
    if host == str(address):
        return f"{address} is"
    written = written_address(host.strip("[]"))
    if isinstance(written, ipaddress.IPv6Address) and written.ipv4_mapped is not None:
        written = written.ipv4_mapped
    name = host.lower().rstrip(".")
    if written == address and name != "localhost" and not name.endswith(".localhost"):
        return f"{host} is {address} written another way,"
    return f"{host} resolves to {address},"


def resolve(host: str, port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses `host` names, in the resolver's order, without repeats. Raises OSError
    (socket.gaierror) when it names none."""
    found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


# -------------------------------------------------------------------- plain http, in clear

_HTTP_SETTING = "QM_WEBHOOK_ALLOW_HTTP"
_HTTP_WHY = ("a plain http URL sends each notification unencrypted (job names, users, teams; the signature "
             "proves who sent it but hides nothing)")


def http_allowed_anywhere() -> bool:
    """QM_WEBHOOK_ALLOW_HTTP: plain http to any address the other rules allow (a closed network).
    Off by default."""
    raw = _qm("WEBHOOK_ALLOW_HTTP", False)
    if isinstance(raw, str):
        return raw.strip().lower() in ("1", "true", "yes", "on")
    return bool(raw)


def http_problem(host: str, addresses: Sequence[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> str | None:
    """Why a plain http POST may not go to `host` (at `addresses`), in words; None when it may:
    every address inside QM_WEBHOOK_ALLOWED_NETWORKS, or QM_WEBHOOK_ALLOW_HTTP set."""
    if http_allowed_anywhere():
        return None
    networks = allowed_networks()
    for address in addresses:
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        if not any(address in network for network in networks):
            where = f"{address}" if host == str(address) else f"{host} ({address})"
            return (f"{where} is not inside {_NETWORKS_SETTING}: {_HTTP_WHY}, so http may only reach those "
                    f"networks (an internal relay), or any host if an admin sets {_HTTP_SETTING}. Use https://.")
    return None


def events_problem(events: Any) -> str | None:
    known = [c.value for c in NotifyOn]
    if not isinstance(events, list) or not events:
        return f"give a list of one or more of: {', '.join(known)}."
    unknown = [str(e) for e in events if e not in known]
    if unknown:
        return f"{', '.join(repr(u)[:40] for u in unknown)} {'is' if len(unknown) == 1 else 'are'} not " \
               f"an event: use {', '.join(known)}."
    # a hook's events are a set; the list says each once (services/given_once.py)
    return repeated_problem(events, "event")


# ---------------------------------------------------------------------------------- sending


@dataclass(frozen=True)
class Outcome:
    ok: bool
    status: int | None
    words: str  # "HTTP 200", "HTTP 500: <body>", "timed out after 5 s", "connection refused", ...
    seconds: float


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Refusal:
    """Why the sender will not POST to a URL: `rule` is "url" (the URL itself: its scheme, a
    credential in it, QM_WEBHOOK_ALLOWED_HOSTS, an address written in it), "address" (an address
    its host resolves to: `address_problem`) or "http" (plain http outside
    QM_WEBHOOK_ALLOWED_NETWORKS: `http_problem`); `words` says it with what to do."""

    rule: str
    words: str
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = None


def sending_problem(url: str, addresses: Sequence[ipaddress.IPv4Address | ipaddress.IPv6Address] | None = None
                    ) -> Refusal | None:
    """Why the sender refuses to POST to `url`, None when it may: the one home of that rule.
    `post` asks it before every POST, with the addresses it resolved for that POST; a hook's
    `deliverable` (`undeliverable_reason`) asks it with the addresses its host resolves to now.
    Without `addresses`, only what the URL itself says (a host written as an address is judged
    as written)."""
    problem = url_problem(url, resolve_names=False)
    if problem is not None:
        return Refusal("url", problem)
    if addresses is None:
        return None
    parts = urlsplit(url)
    host = str(parts.hostname)
    for address in addresses:
        refused = address_problem(host, address)
        if refused is not None:
            return Refusal("address", refused, address)
    clear = http_problem(host, addresses) if parts.scheme == "http" else None
    return Refusal("http", clear) if clear is not None else None


def undeliverable_reason(url: str) -> str | None:
    """Why every POST of this hook is refused here now, in the sender's words
    (`sending_problem`); None when its deliveries may go (whether the receiver answers is
    another matter: `health`). For an owner whose hook stopped: a plain http hook saved before
    http was limited to QM_WEBHOOK_ALLOWED_NETWORKS, a host since left out of
    QM_WEBHOOK_ALLOWED_HOSTS, a name that now resolves to a private address.

    A host name is resolved here only when the rule needs its addresses to judge a plain http
    URL (and QM_WEBHOOK_ALLOW_HTTP is off): the sender resolves it at each POST too, and an
    https name's addresses are judged there (a refusal is the delivery's error). A name that
    does not resolve right now is not called undeliverable: resolving may work at the next
    POST, and the delivery says when it did not. The words never hold the URL's hidden parts."""
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        host = parts.hostname or ""
    except ValueError:
        refusal = sending_problem(url)
        return refusal.words.replace(url[:100], masked_url(url)) if refusal else None
    addresses = None
    if parts.scheme == "http" and host and not _is_address(host) and not http_allowed_anywhere():
        try:
            addresses = resolve(host, port)
        except (OSError, UnicodeError):
            addresses = None
    refusal = sending_problem(url, addresses)
    return refusal.words.replace(url[:100], masked_url(url)) if refusal is not None else None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def post(url: str, secret: str, payload: dict[str, Any], *, event: str, delivery_id: int | None) -> Outcome:
    """One POST, with the signature; never raises. Only a 2xx counts as delivered.

    The host is resolved here, every address it names is checked (`address_problem`: one
    refused address refuses the POST), and the connection goes to the checked address itself,
    the host name kept for the Host header and for TLS (SNI, the certificate's name): a name
    whose answer changes between the check and the connection (DNS rebinding) cannot send the
    POST elsewhere. Environment proxies are not used (a proxy would resolve the name again).
    A plain http POST goes only to addresses inside QM_WEBHOOK_ALLOWED_NETWORKS (`http_problem`)."""
    started = time.monotonic()
    refusal = sending_problem(url)
    if refusal is not None:
        return Outcome(False, None, f"not sent: {refusal.words}", 0.0)
    parts = urlsplit(url)
    host = str(parts.hostname)
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError) as error:
        return Outcome(False, None, f"not sent: could not resolve {host} ({_short(error)})", time.monotonic() - started)
    refusal = sending_problem(url, addresses)
    if refusal is not None:
        if refusal.rule == "address":
            log.warning("notifications.address_refused", host=host, address=str(refusal.address),
                        delivery=delivery_id, setting=_NETWORKS_SETTING)
        else:  # plain http: a name that resolved inside the allowed networks when the hook was saved
            log.warning("notifications.http_refused", host=host, delivery=delivery_id, setting=_HTTP_SETTING)
        return Outcome(False, None, f"not sent: {refusal.words}", time.monotonic() - started)
    body = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    headers = {
        "Host": (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else ""),
        "Content-Type": "application/json", "User-Agent": USER_AGENT, SIGNATURE_HEADER: sign(secret, body),
        "X-Quartermaster-Event": event, "X-Quartermaster-Delivery": str(delivery_id or ""),
    }
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    wait = timeout_s()
    failure = Outcome(False, None, f"could not connect (no address for {host})", 0.0)
    for address in addresses:  # the next one only when this one cannot be connected to
        try:
            return _post_to(address, port, https, host, target, body, headers, wait, started)
        except urllib3.exceptions.NewConnectionError as error:  # before ConnectTimeoutError: its subclass
            words = "connection refused" if "refused" in str(error).lower() else f"could not connect ({_short(error)})"
            failure = Outcome(False, None, words, time.monotonic() - started)
        except urllib3.exceptions.ConnectTimeoutError:
            failure = Outcome(False, None, f"timed out after {wait:g} s", time.monotonic() - started)
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            return Outcome(False, None, f"timed out after {wait:g} s", time.monotonic() - started)
        except urllib3.exceptions.SSLError as error:
            return Outcome(False, None, f"TLS failed: {_short(error)}", time.monotonic() - started)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            return Outcome(False, None, f"failed: {_short(error)}", time.monotonic() - started)
    return failure


def ca_bundle() -> str:
    """The certificate authorities an https receiver's certificate must chain to: the file named
    by REQUESTS_CA_BUNDLE or CURL_CA_BUNDLE (as `requests` reads them; a site's internal CA),
    else certifi's."""
    return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or certifi.where()


def _post_to(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int, https: bool, host: str, target: str,
             body: bytes, headers: dict[str, str], wait: float, started: float) -> Outcome:
    """The POST on a connection to `address` itself (pinned: no second resolution)."""
    timeout = urllib3.Timeout(connect=wait, read=wait)
    pool: urllib3.HTTPConnectionPool
    if https:
        pool = urllib3.HTTPSConnectionPool(str(address), port, timeout=timeout, maxsize=1, retries=False,
                                           cert_reqs="CERT_REQUIRED", ca_certs=ca_bundle(),
                                           assert_hostname=host, server_hostname=host)
    else:
        pool = urllib3.HTTPConnectionPool(str(address), port, timeout=timeout, maxsize=1, retries=False)
    with pool:
        response = pool.urlopen("POST", target, body=body, headers=headers, redirect=False, retries=False,
                                preload_content=False, assert_same_host=False)
        try:
            said = response.read(300, decode_content=True).decode("utf-8", "replace").strip()
            status = response.status
            location = response.headers.get("Location", "")
        finally:
            response.release_conn()
    seconds = time.monotonic() - started
    if 200 <= status < 300:
        return Outcome(True, status, f"HTTP {status}", seconds)
    if 300 <= status < 400:
        return Outcome(False, status, f"HTTP {status} redirect to {location[:150]} (not followed: give the hook "
                                      "the final URL)", seconds)
    return Outcome(False, status, f"HTTP {status}" + (f": {' '.join(said.split())[:200]}" if said else ""), seconds)


def _short(error: BaseException) -> str:
    return " ".join(str(error).split())[:200]


def backoff_s(attempts: int) -> float:
    """The wait after the `attempts`-th failed attempt: 30 s, 1 min, 2 min, ... at most 1 h."""
    return min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, attempts - 1))


@dataclass(frozen=True)
class Sent:
    found_work: bool
    delivered: int = 0
    failed: int = 0
    postponed: int = 0


def deliver_due(*, now: datetime | None = None, limit: int = 200) -> Sent:
    """POST the deliveries due at `now` (the module's docstring, step 2)."""
    now = now or timezone.now()
    rows = _claim(now, limit)
    if not rows:
        _prune_now_and_then(now)
        return Sent(found_work=False)
    by_hook: dict[int, list[NotificationDelivery]] = defaultdict(list)
    for row in rows:
        by_hook[row.hook_id].append(row)
    outcomes = _send_in_order(by_hook)
    done = timezone.now()
    delivered = failed = postponed = 0
    moved_any = False
    for hook_id, batch in by_hook.items():
        sent = outcomes[hook_id]
        retry_at: datetime | None = None
        # One hook's outcomes and its health in one commit: a reader never sees a recorded
        # attempt whose hook does not count it yet. The hook's row first (as a change or a
        # deletion of the hook locks it: never a deadlock with one), so the URL it has now is
        # the one a change committed last.
        with transaction.atomic():
            current = _current_url(hook_id)
            for row, (outcome, target) in zip(batch, sent, strict=False):
                if outcome.ok:
                    delivered += 1
                else:
                    failed += 1
                moved = current is not None and target.url != current
                moved_any = moved_any or (moved and not outcome.ok)
                retry_at = _record(row, outcome, done, moved=moved)
            for row in batch[len(sent):]:  # behind a failure of the same hook, or its hook paused: wait
                postponed += 1
                type(row).objects.filter(pk=row.pk).update(next_attempt_at=retry_at or done)
            if current is not None:
                _record_hook(hook_id, current, [outcome for outcome, target in sent if target.url == current], done)
    if moved_any:  # due again at once, at the hook's new URL
        _wake_sender()
    log.info("notifications.sent", delivered=delivered, failed=failed, postponed=postponed, hooks=len(by_hook))
    return Sent(found_work=True, delivered=delivered, failed=failed, postponed=postponed)


def _claim(now: datetime, limit: int) -> list[NotificationDelivery]:
    from controlplane.models import NotificationDelivery

    with transaction.atomic():
        # Not behind an older row of its hook that waits for a retry (or is claimed by another
        # sender): a hook's notifications arrive in the order they were queued.
        waiting = NotificationDelivery.objects.filter(hook_id=OuterRef("hook_id"), id__lt=OuterRef("id"),
                                                      next_attempt_at__gt=now)
        due = NotificationDelivery.objects.filter(next_attempt_at__lte=now, hook__active=True).exclude(
            Exists(waiting)).order_by("next_attempt_at", "id")
        if connection.features.has_select_for_update_skip_locked:
            due = due.select_for_update(skip_locked=True, of=("self",))
        ids = list(due.values_list("id", flat=True)[:limit])
        if not ids:
            return []
        NotificationDelivery.objects.filter(pk__in=ids).update(next_attempt_at=now + timedelta(seconds=CLAIM_S))
    # The rows only: where each goes is read right before it is sent (`_send_in_order`).
    return list(NotificationDelivery.objects.filter(pk__in=ids).order_by("id"))


@dataclass(frozen=True)
class Target:
    """Where one POST went and what signed it: the hook's URL and secret as the sender read
    them right before it."""

    url: str
    secret: str


def current_targets(hook_ids: Sequence[int]) -> dict[int, Target]:
    """The URL and secret each of these hooks has now (committed), for the POST about to go:
    one query. A hook deleted or paused since its rows were claimed is not in the answer."""
    from controlplane.models import NotificationHook

    ids = [int(pk) for pk in hook_ids]
    with connection.cursor() as cursor:  # one short statement per POST: no ORM compilation each time
        cursor.execute(f"SELECT id, url, secret FROM {NotificationHook._meta.db_table} WHERE active AND id IN "
                       f"({', '.join(['%s'] * len(ids))})", ids)
        rows = cursor.fetchall()
    return {pk: Target(url, secret) for pk, url, secret in rows}


def _send_in_order(by_hook: dict[int, list[NotificationDelivery]]) -> dict[int, list[tuple[Outcome, Target]]]:
    """Each hook's claimed rows, oldest first, until one fails: at most one POST of a hook on
    the wire at a time, up to SENDER_THREADS hooks at once.

    The database is read on this thread only (the POSTs run on the pool's, without one): right
    before a hook's next POST goes to a free thread, the hook's URL and secret are read as
    committed now (`current_targets`, one query for the hooks whose turn it is), so a delivery
    goes to the URL the hook has when it is sent, signed with the secret it has then, not the
    one it had when it was queued or claimed. A hook paused or deleted meanwhile sends no more."""
    queues = {hook_id: list(rows) for hook_id, rows in by_hook.items()}
    sent: dict[int, list[tuple[Outcome, Target]]] = {hook_id: [] for hook_id in by_hook}
    ready = list(by_hook)  # hooks whose next row may go
    in_flight: dict[Future[Outcome], tuple[int, Target]] = {}
    with ThreadPoolExecutor(max_workers=min(SENDER_THREADS, len(by_hook)), thread_name_prefix="qm-webhook") as pool:
        while ready or in_flight:
            turn, ready = ready[:SENDER_THREADS - len(in_flight)], ready[SENDER_THREADS - len(in_flight):]
            targets = current_targets(turn) if turn else {}
            for hook_id in turn:
                target = targets.get(hook_id)
                if target is None:  # paused or deleted since the claim: its rows wait (or are gone)
                    continue
                row = queues[hook_id][len(sent[hook_id])]
                future = pool.submit(post, target.url, target.secret, row.payload, event=row.event,
                                     delivery_id=row.pk)
                in_flight[future] = (hook_id, target)
            if not in_flight:
                continue
            finished, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in finished:
                hook_id, target = in_flight.pop(future)
                outcome = future.result()
                sent[hook_id].append((outcome, target))
                if outcome.ok and len(sent[hook_id]) < len(queues[hook_id]):
                    ready.append(hook_id)
    return sent


def _current_url(hook_id: int) -> str | None:
    """The hook's URL as committed now, its row locked (FOR NO KEY UPDATE: the deliveries
    queued for it meanwhile are not held up) until the caller's transaction ends; None when it
    was deleted."""
    from controlplane.models import NotificationHook

    hooks = NotificationHook.objects.filter(pk=hook_id)
    if connection.features.has_select_for_update:
        hooks = hooks.select_for_update(no_key=connection.features.has_select_for_no_key_update)
    return hooks.values_list("url", flat=True).first()


#: A failed POST to a URL the hook no longer has: said on the row, which is tried again at once.
MOVED = " (sent to the hook's previous URL: the URL changed while this POST was on its way; tried again at the new one)"


def _record(row: NotificationDelivery, outcome: Outcome, at: datetime, *, moved: bool = False) -> datetime | None:
    """Write one attempt's outcome; returns when the row is tried again (None: never).

    `moved`: the hook's URL changed after this POST read it. A success stands (the notification
    reached the receiver the hook had when it was sent); a failure counts the attempt but is due
    again at once, at the new URL, and never gives the row up."""
    attempts = row.attempts + 1
    fields: dict[str, Any] = {"attempts": attempts, "last_status": outcome.status}
    retry_at: datetime | None = None
    if outcome.ok:
        fields.update(delivered_at=at, next_attempt_at=None, last_error="")
    elif moved:
        retry_at = at
        fields.update(next_attempt_at=retry_at, last_error=(outcome.words[:500 - len(MOVED)] + MOVED))
    elif attempts >= max_attempts():
        fields.update(next_attempt_at=None, last_error=f"gave up after {attempts} attempts; the last: {outcome.words}"[:500])
    else:
        retry_at = at + timedelta(seconds=backoff_s(attempts))
        fields.update(next_attempt_at=retry_at, last_error=outcome.words[:500])
    type(row).objects.filter(pk=row.pk).update(**fields)
    return retry_at


def _record_hook(hook_id: int, url: str, sent: list[Outcome], at: datetime) -> None:
    """The hook's health after these POSTs to `url`; nothing when its URL is no longer `url` (a
    new URL starts afresh: the old one's answers are not its)."""
    from controlplane.models import NotificationHook

    if not sent:
        return
    last = sent[-1]
    failures = sum(not o.ok for o in sent)
    status = f"{last.words} at {at:%Y-%m-%d %H:%M:%S} UTC"[:300]
    consecutive = 0 if last.ok else F("consecutive_failures") + failures
    NotificationHook.objects.filter(pk=hook_id, url=url).update(last_delivery_at=at, last_status=status,
                                                                consecutive_failures=consecutive)


class DeletedWhileTesting(Exception):
    """The hook was deleted while its test notification was on the wire: the POST went out (its
    `outcome`), and its delivery row went with the hook."""

    def __init__(self, outcome: Outcome) -> None:
        super().__init__(outcome.words)
        self.outcome = outcome


def send_test(hook: NotificationHook, *, actor: str) -> tuple[NotificationDelivery, Outcome]:
    """POST a test notification to the hook now (not retried), record it like any delivery.

    The hook is read afresh, its row locked, as its delivery row is written (the URL and secret
    it has now, as the sender reads them before each POST), but not while the POST is on the
    wire. Raises NotificationHook.DoesNotExist when it is gone before the POST (nothing sent),
    and DeletedWhileTesting when it was deleted meanwhile (sent; its row gone with it): before,
    the first was a 409 quoting the database's foreign key, the second a 500."""
    from controlplane.models import NotificationDelivery, NotificationHook

    at = timezone.now()
    url = f"{public_url()}/jobs/"
    with transaction.atomic():
        hook = (NotificationHook.objects.select_for_update(no_key=connection.features.has_select_for_no_key_update,
                                                           of=("self",))
                .select_related("team").get(pk=hook.pk))
        payload = {
            "text": f"Test notification from Quartermaster for hook {hook.pk} ({', '.join(hook.events)}), sent by "
                    f"{actor_name(actor)}: it works. {url}",
            "event": TEST_EVENT, "job_id": None, "job_name": None, "team": hook.team.name if hook.team_id else None,
            "state": None, "message": "Test notification: it works.", "reason": "Test", "actor": actor, "url": url,
            "at": at.isoformat(),
        }
        row = NotificationDelivery.objects.create(hook=hook, event=TEST_EVENT, payload=payload, created_at=at)
    outcome = post(hook.url, hook.secret, payload, event=TEST_EVENT, delivery_id=row.pk)
    done = timezone.now()
    with transaction.atomic():
        if not NotificationDelivery.objects.filter(pk=row.pk).update(
                attempts=1, last_status=outcome.status, delivered_at=done if outcome.ok else None,
                last_error="" if outcome.ok else outcome.words[:500]):
            raise DeletedWhileTesting(outcome)
        _record_hook(hook.pk, hook.url, [outcome], done)
        row.refresh_from_db()  # locked by the update above: a deletion now waits for this commit
    return row, outcome


def health(hook: NotificationHook, *, due: int | None = None, undeliverable: str | None = None) -> tuple[bool, str]:
    """(failing, the hook's state in one sentence) for the API and `qm notify list`.
    `undeliverable`: `undeliverable_reason` of its URL, which the sentence leads with."""
    failing = hook.consecutive_failures >= failing_after()
    if not hook.active:
        words = "paused (active is false): nothing is sent; deliveries queued before wait"
    elif undeliverable:
        words = f"not delivering: every POST to this URL is refused here: {undeliverable}"
    elif failing:
        words = (f"failing: the last {hook.consecutive_failures} attempts failed ({hook.last_status}); deliveries "
                 f"are kept and retried with backoff (at most {max_attempts()} attempts each): fix the receiver, "
                 "or change the URL")
    elif hook.last_delivery_at is None:
        words = "nothing sent yet"
    elif hook.consecutive_failures:
        words = f"retrying: the last {hook.consecutive_failures} attempt(s) failed ({hook.last_status})"
    else:
        words = f"delivering: {hook.last_status}"
    if due:
        words += f"; {due} delivery(ies) waiting to be sent"
    return failing, words


# -------------------------------------------------------------------------------- retention

_pruned_at = 0.0
_prune_lock = threading.Lock()


def prune(now: datetime, *, keep_days: float | None = None) -> int:
    """Drop delivered and given-up rows older than NOTIFICATION_KEEP_DAYS (30 by default)."""
    from controlplane.models import NotificationDelivery

    days = float(_qm("NOTIFICATION_KEEP_DAYS", 30) if keep_days is None else keep_days)
    deleted, _ = NotificationDelivery.objects.filter(
        next_attempt_at__isnull=True, created_at__lt=now - timedelta(days=days)).delete()
    return deleted


def _prune_now_and_then(now: datetime) -> None:
    """At most once an hour per process, in an idle round."""
    global _pruned_at
    with _prune_lock:
        if time.monotonic() - _pruned_at < 3600 and _pruned_at:
            return
        _pruned_at = time.monotonic()
    prune(now)


# ------------------------------------------------------------- a hook's changes, on record
#
# A hook decides where the fleet's job news goes: who created, redirected, widened, paused or
# deleted one, and when, is a `config.changed` event (reasons NotificationHookCreated,
# NotificationHookChanged, NotificationHookDeleted), written in the transaction that writes the
# hook. The event keeps the URL masked (`masked_url`) with a digest of the whole URL, so a
# change of a credential in it still reads as a change, and never the secret (only that it was
# replaced). It names no team: the fleet's audit trail of hooks is an admin's to read, not the
# team's; each hook's own history is read by whoever may read the hook (`hook_history`).


def hook_record(hook: NotificationHook) -> dict[str, Any]:
    """What the audit trail keeps of a hook."""
    return {"id": hook.pk, "user": hook.user.get_username(), "team": hook.team.name if hook.team_id else None,
            "url": masked_url(hook.url), "url_digest": hashlib.sha256(hook.url.encode()).hexdigest()[:16],
            "events": list(hook.events), "active": bool(hook.active)}


def _whose(record: dict[str, Any]) -> str:
    return f"every job of team {record['team']}" if record["team"] else f"{record['user']}'s own jobs"


def _hook_changes(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    said = []
    if before["url"] != after["url"] or before["url_digest"] != after["url_digest"]:
        said.append(f"url {before['url']} → {after['url']}" if before["url"] != after["url"]
                    else f"url {after['url']} (changed inside its hidden part)")
    if before["events"] != after["events"]:
        said.append(f"events {', '.join(before['events'])} → {', '.join(after['events'])}")
    if before["team"] != after["team"]:
        said.append(f"for {_whose(before)} → {_whose(after)}")
    if before["active"] != after["active"]:
        said.append("resumed" if after["active"] else "paused")
    return said


def record_hook_change(hook: NotificationHook, verb: str, before: dict[str, Any] | None, actor: str, *,
                       secret: str = "", why: str = "") -> Event | None:
    """Record a hook `created`, `changed` or `deleted` (call it before deleting, with `before`
    from `hook_record`) in the caller's transaction. `secret`: "generated" or "given" when the
    signing secret was replaced. `why`: what deleted it, when not its own deletion ("(user bob
    deleted)": services/config_audit.py). Nothing for a change that changed nothing."""
    from controlplane.models import Event

    fields = _hook_event_fields(hook, verb, before, actor, secret=secret, why=why)
    return Event.objects.create(**fields) if fields is not None else None


def _hook_event_fields(hook: NotificationHook, verb: str, before: dict[str, Any] | None, actor: str, *,
                       secret: str = "", why: str = "") -> dict[str, Any] | None:
    from controlplane.services.transitions import event_fields

    after = hook_record(hook) if verb != "deleted" else None
    label = f"Notification hook {hook.pk} of {hook.user.get_username()}"
    if verb == "created":
        assert after is not None
        message = f"{label} created: {', '.join(after['events'])} of {_whose(after)} to {after['url']}" + (
            "" if after["active"] else " (paused)")
    elif verb == "deleted":
        assert before is not None
        message = (f"{label} deleted (it sent {', '.join(before['events'])} of {_whose(before)} to {before['url']})"
                   f"{why}")
    else:
        assert before is not None and after is not None
        said = _hook_changes(before, after)
        if secret:
            said.append("signing secret replaced" + (" by a new random one" if secret == "generated" else ""))
        if not said:
            return None
        message = f"{label} changed: {'; '.join(said)}"
    data: dict[str, Any] = {"model": "notificationhook", "before": before, "after": after}
    if secret:
        data["secret"] = secret
    return event_fields(EventKind.CONFIG_CHANGED, actor, reason=f"NotificationHook{verb.title()}", message=message,
                        data=data)


def create_hook(user: Any, *, url: str, events: list[str], team: Any | None, actor: str, secret: str | None = None,
                active: bool = True) -> NotificationHook:
    """A new hook of `user` (its fields checked by the caller: `url_problem`, `events_problem`),
    with a random secret unless one is given; recorded."""
    from controlplane.models import NotificationHook

    with transaction.atomic():
        hook = NotificationHook.objects.create(user=user, url=url, events=events, team=team, active=active,
                                               secret=secret or new_secret(), created_at=timezone.now())
        record_hook_change(hook, "created", None, actor)
    return hook


#: What `change_hook` may change (the API's PATCH).
CHANGEABLE = frozenset({"url", "events", "team", "active", "secret"})


def change_hook(hook: NotificationHook, changes: dict[str, Any], *, actor: str) -> NotificationHook:
    """Apply `changes` (CHANGEABLE fields, checked by the caller; `team` a Team or None) to the
    hook, locked, and record them: all of it or nothing. A `secret` of None draws a new random
    one (a rotation). A new URL starts the hook's health afresh: the failures counted were the
    old URL's. Deliveries still queued go to the new URL and are signed with the new secret when
    they are next sent (the sender reads both right before each POST; one already on the wire
    when this commits may still reach the old URL). Returns the hook as stored; raises NotificationHook.DoesNotExist when it
    was deleted meanwhile (nothing written)."""
    from controlplane.models import NotificationHook

    unknown = set(changes) - CHANGEABLE
    if unknown:
        raise ValueError(f"not a hook's changeable field: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        stored = NotificationHook.objects.select_for_update(of=("self",)).select_related("user", "team").get(
            pk=hook.pk)
        before = hook_record(stored)
        secret = ""
        if "secret" in changes:
            secret = "given" if changes["secret"] else "generated"
            stored.secret = changes["secret"] or new_secret()
        if "url" in changes and changes["url"] != stored.url:
            stored.url = changes["url"]
            stored.consecutive_failures = 0
            stored.last_status = ""
            stored.last_delivery_at = None
        if "events" in changes:
            stored.events = list(changes["events"])
        if "team" in changes:
            stored.team = changes["team"]
        if "active" in changes:
            stored.active = bool(changes["active"])
        stored.save()
        record_hook_change(stored, "changed", before, actor, secret=secret)
    return stored


def rotate_secret(hook: NotificationHook, *, actor: str) -> NotificationHook:
    """A new random signing secret for the hook, recorded (the old one stops at once)."""
    return change_hook(hook, {"secret": None}, actor=actor)


def deleted_with_owner(hooks: Any, actor: str, why: str) -> None:
    """Record each of ``hooks`` (a queryset), about to be deleted with its user or team (CASCADE):
    the trail would otherwise still read them as sending. One query and one insert."""
    from controlplane.models import Event

    Event.objects.bulk_create(deletions_with_owner(hooks, actor, lambda hook: why), batch_size=2000)


def deletions_with_owner(hooks: Any, actor: str, why: Callable[[NotificationHook], str]) -> list[Event]:
    """The `NotificationHookDeleted` events (not yet written) of ``hooks`` (a queryset), about to
    be deleted with their users or team, each saying ``why(hook)``: one query."""
    from controlplane.models import Event

    return [Event(**fields) for hook in hooks.select_related("user", "team").order_by("pk")
            if (fields := _hook_event_fields(hook, "deleted", hook_record(hook), actor, why=why(hook))) is not None]


def hooks_gone_lines(hooks: Any) -> list[str]:
    """One line per hook of ``hooks`` that goes with its user or team, for what a DELETE answers."""
    return [f"Notification hook {hook.pk} of {record['user']}, which sent {', '.join(record['events'])} of "
            f"{_whose(record)} to {record['url']}, is deleted"
            for hook in hooks.select_related("user", "team").order_by("pk") if (record := hook_record(hook))]


def delete_hook(hook: NotificationHook, *, actor: str) -> bool:
    """Delete the hook and its queued deliveries, recorded; False (nothing recorded) when it was
    deleted meanwhile."""
    from controlplane.models import NotificationHook

    with transaction.atomic():
        stored = NotificationHook.objects.select_for_update(of=("self",)).select_related("user", "team").filter(
            pk=hook.pk).first()
        if stored is None:
            return False
        record_hook_change(stored, "deleted", hook_record(stored), actor)
        stored.delete()
    return True


#: The reasons of a hook's own changes, and the most of them `hook_history` gives.
HOOK_CHANGE_REASONS = ("NotificationHookCreated", "NotificationHookChanged", "NotificationHookDeleted")
HISTORY_LIMIT = 100


@dataclass(frozen=True)
class HistoryEntry:
    """One change of a hook as its history shows it: the audit event, as recorded (the URL
    masked, with a digest of the whole; the secret never, only `secret`: "generated" or "given"
    when it was replaced)."""

    id: int
    at: datetime
    actor: str  # user:alice, user:root (an admin), ...
    change: str  # created, changed, deleted
    message: str  # "Notification hook 7 of alice changed: url … → …; paused"
    what: str  # the message without its "Notification hook 7 of alice " prefix: "changed: …"
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    secret: str | None

    @property
    def who(self) -> str:
        return actor_name(self.actor)


def _history_events(hook_ids: Sequence[int]) -> Any:
    from controlplane.models import Event

    ids = [int(pk) for pk in hook_ids]
    # The (kind, created_at) index narrows to the configuration changes, a short list beside
    # the jobs' events; the hook's id is in `before` (a deletion, a change) or `after`.
    return Event.objects.filter(kind=EventKind.CONFIG_CHANGED, reason__in=HOOK_CHANGE_REASONS,
                                data__model="notificationhook").filter(
        Q(data__after__id__in=ids) | Q(data__before__id__in=ids)).only(
        "id", "created_at", "actor", "reason", "message", "data")


def _entry(event: Event) -> HistoryEntry:
    data = event.data if isinstance(event.data, dict) else {}
    before, after = data.get("before"), data.get("after")
    record = after or before or {}
    label = f"Notification hook {record.get('id')} of {record.get('user')} "
    message = event.message
    return HistoryEntry(event.pk, event.created_at, event.actor,
                        event.reason.removeprefix("NotificationHook").lower(), message,
                        message.removeprefix(label) if message.startswith(label) else message,
                        before, after, data.get("secret"))


def hook_history(hook: NotificationHook, *, limit: int = HISTORY_LIMIT) -> list[HistoryEntry]:
    """The hook's own changes, newest first (at most `limit`): its creation, every change of its
    URL, events, team, pause and secret, from the API, `qm notify`, the page or the admin UI;
    one query. Who may read it is the caller's to decide: whoever may read the hook."""
    events = _history_events([hook.pk]).order_by("-created_at", "-id")[:limit]
    return [_entry(e) for e in events]


def hooks_history(hook_ids: Sequence[int], *, limit: int = HISTORY_LIMIT) -> dict[int, list[HistoryEntry]]:
    """`hook_history` of each of these hooks, in one query whatever their number."""
    if not hook_ids:
        return {}
    wanted = {int(pk) for pk in hook_ids}
    found: dict[int, list[HistoryEntry]] = defaultdict(list)
    for event in _history_events(sorted(wanted)).order_by("-created_at", "-id"):
        entry = _entry(event)
        pk = (entry.after or entry.before or {}).get("id")
        if pk in wanted and len(found[pk]) < limit:
            found[pk].append(entry)
    return found


# ------------------------------------------------------------------- the settings page's reads

#: A path segment this long made only of token characters, with a digit or a capital in it, is
#: taken for a credential (Slack's 24-character key, Mattermost's 26, Discord's 68, a Teams
#: workflow's 32-hex id); lower-case words (`receiver-of-jobs`) are a path's names.
_TOKEN_MIN_CHARS = 16
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~%+=")
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz-_.")
MASK = "…"


def _token_like(segment: str) -> bool:
    chars = set(segment)
    return len(segment) >= _TOKEN_MIN_CHARS and chars <= _TOKEN_CHARS and not chars <= _WORD_CHARS


def _masked(value: str) -> str:
    return value[:3] + MASK if len(value) > 6 else MASK


def masked_url(url: str) -> str:
    """A hook's URL as a page shows it: the credentials some receivers keep in their URLs hidden.

    Every query value is hidden (`?token=abc…`, Teams' `sig=`), and so is every path segment of
    16 or more token characters with a digit or a capital (Slack's `/services/T…/B…/<key>`,
    Mattermost's `/hooks/<key>`);
    each keeps its first 3 characters so a user tells two hooks apart. A user name or password
    (refused by `url_problem`, but an older row may have one) is hidden whole."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return _masked(url)
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    netloc = (f"{MASK}@" if parts.username or parts.password else "") + host + (f":{port}" if port else "")
    segments = [
        _masked(s) if _token_like(s) else s for s in parts.path.split("/")
    ]
    query = "&".join(
        (f"{pair.split('=', 1)[0]}={_masked(pair.split('=', 1)[1])}" if "=" in pair else _masked(pair))
        for pair in parts.query.split("&") if pair
    )
    return f"{parts.scheme}://{netloc}{'/'.join(segments)}" + (f"?{query}" if query else "")


@dataclass(frozen=True)
class DeliveryRow:
    """One delivery as the settings page lists it."""

    id: int
    event: str
    job_id: int | None
    created_at: datetime
    attempts: int
    status: str  # delivered, waiting, failed, queued
    result: str  # "HTTP 200", "connection refused", "gave up after 10 attempts; the last: HTTP 500"
    next_attempt_at: datetime | None


def delivery_row(row: NotificationDelivery) -> DeliveryRow:
    """A delivery's state in words: delivered (with the receiver's status), waiting for a retry
    (with the last attempt's error), never tried yet, or failed for good (given up, or a test,
    which is never retried)."""
    code = f"HTTP {row.last_status}" if row.last_status else ""
    if row.delivered_at is not None:
        status, result = "delivered", code or "delivered"
    elif row.next_attempt_at is not None:
        status = "waiting" if row.attempts else "queued"
        result = row.last_error or code or "not tried yet"
    else:
        status, result = "failed", row.last_error or code or "not delivered"
    return DeliveryRow(row.pk, row.event, row.job_id, row.created_at, row.attempts, status, result,
                       row.next_attempt_at)


@dataclass(frozen=True)
class HookRow:
    """One hook as the settings page lists it, with its latest deliveries, newest first."""

    hook: NotificationHook
    shown_url: str
    team: str | None
    failing: bool
    status: str
    deliveries: list[DeliveryRow]
    undeliverable: str | None = None  # `undeliverable_reason`: why every POST of it is refused
    history: list[HistoryEntry] = field(default_factory=list)  # `hook_history`, newest first


def hooks_owner(viewer: Any, username: str | None) -> Any | None:
    """Whose hooks `viewer`'s settings page lists: their own; an admin may name another user, as
    the API's `?user=` (admins see and change every hook, and create only their own). None when
    the viewer may not: a member naming anyone else, or no user of that name."""
    from controlplane.services import access

    if not username or username == viewer.get_username():
        return viewer
    if not access.access_of(viewer).is_admin:
        return None
    return get_user_model().objects.filter(username=username).first()


def hooks_of(user: Any) -> Any:
    """The hooks of `user` (one user's, whoever asks: `hooks_owner` says whose a viewer may read)."""
    from controlplane.models import NotificationHook

    return NotificationHook.objects.filter(user=user).select_related("team").annotate(
        due=Count("deliveries", filter=Q(deliveries__next_attempt_at__isnull=False))).order_by("id")


def hooks_page(user: Any, *, deliveries: int = 5) -> list[HookRow]:
    """The user's hooks, each with its last `deliveries` deliveries and its history: three
    queries whatever the number of hooks, deliveries and changes (one when the user has none)."""
    from controlplane.models import NotificationDelivery

    hooks = list(hooks_of(user))
    if not hooks:
        return []
    latest: dict[int, list[DeliveryRow]] = defaultdict(list)
    rows = NotificationDelivery.objects.filter(hook_id__in=[h.pk for h in hooks]).defer("payload").annotate(
        newest=Window(RowNumber(), partition_by=F("hook_id"), order_by=F("id").desc())
    ).filter(newest__lte=deliveries).order_by("hook_id", "-id")
    for row in rows:
        latest[row.hook_id].append(delivery_row(row))
    history = hooks_history([h.pk for h in hooks])
    page = []
    for hook in hooks:
        refused = undeliverable_reason(hook.url)
        failing, words = health(hook, due=hook.due, undeliverable=refused)
        page.append(HookRow(hook, masked_url(hook.url), hook.team.name if hook.team_id else None, failing, words,
                            latest[hook.pk], refused, history.get(hook.pk, [])))
    return page


def teams_to_follow(user: Any) -> list[str]:
    """The teams a user may give a hook (`team`): their own, every team for an admin (the API's
    `validate_team` says the same)."""
    from controlplane.models import Team
    from controlplane.services import access

    who = access.access_of(user)
    teams = Team.objects.all() if who.is_admin else Team.objects.filter(pk__in=who.team_ids)
    return list(teams.order_by("name").values_list("name", flat=True))
