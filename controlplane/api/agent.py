"""The node-agent endpoints, mounted at /api/v1/agent/.

    POST register                  bootstrap secret or the node's token → a fresh node token
    POST nodes/<name>/heartbeat    renew the lease, apply reports, get the desired allocations
    POST nodes/<name>/report       apply reports at once (an exit), get the desired allocations

A heartbeat or a report may carry `logs`, chunks of the jobs' output (services/job_logs.py).

Agents authenticate with `Authorization: Bearer <token>`. A node token opens only its own
node's endpoints; the bootstrap secret (QM_AGENT_BOOTSTRAP_TOKEN) opens only `register`. User
tokens and sessions are not accepted here, and agent tokens are not accepted anywhere else.
A token that opens nothing counts against the client's address (api/throttling.py,
`agent_auth`, QM_AGENT_AUTH_FAILURES); beyond the limit such an address is answered 429 with
Retry-After for anything but a node's own token, the bootstrap secret included, unchecked. A
node's token is never refused for it: nobody guesses one, and agents that hold theirs behind
one address go on whatever another's failures.
The business rules are in services/agent_protocol.py; this module parses and answers.
"""

from __future__ import annotations

import math
import select
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import structlog
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.urls import path
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import exceptions, serializers, status
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import throttling
from controlplane.api.errors import Conflict, exception_handler, flatten
from controlplane.api.parsers import BoundedJSONParser
from controlplane.api.serializers.fields import NameField, TextField, WholeNumberField, YesOrNoField
from controlplane.choices import CapacityTier, NodeState
from controlplane.models import Node
from controlplane.models.names import NODE_NAME_MESSAGE, NODE_NAME_PATTERN
from controlplane.services import agent_protocol as protocol
from controlplane.services import agent_wakeups, exit_codes, job_logs
from controlplane.services import nodes as nodes_service
from controlplane.services.plain_text import LINES_REFUSED, ONE_LINE_REFUSED

log = structlog.get_logger(__name__)

MAX_REPORTS = 2000
MAX_BATCH = 256
# Output chunks per contact, and their bytes in all (the agent sends at most 256 KiB).
MAX_LOG_CHUNKS = 256
MAX_LOG_BYTES = 1024 * 1024
#: The most an agent request's body may hold (a 413 beyond it, before it is decoded): Django's
#: DATA_UPLOAD_MAX_MEMORY_SIZE, which DRF reads every JSON body through. One node's contact is
#: under 4 MiB (its CALL_BYTES of output, each byte escaped in at most six, and MAX_REPORTS
#: reports); the simulated agent sends a batch that would be larger in parts
#: (controlplane/agent/client.py, MAX_BODY_BYTES: the same figure).
MAX_AGENT_BODY_BYTES: int = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
# Agent clocks are not trusted further than this: times from the future are taken as "now".
MAX_CLOCK_SKEW = timedelta(seconds=5)


# ------------------------------------------------------------------------------ authentication


@dataclass(frozen=True)
class AgentPrincipal:
    """An authenticated node agent. Not a user: the user-facing API refuses it."""

    node: Node
    is_authenticated: bool = True
    is_active: bool = True
    pk: None = None


@dataclass(frozen=True)
class BootstrapPrincipal:
    """A caller holding the bootstrap secret: it may register a node, nothing else."""

    is_authenticated: bool = True
    is_active: bool = True
    pk: None = None


class AgentTokenAuthentication(BaseAuthentication):
    keyword = b"bearer"

    def authenticate(self, request: Request) -> tuple[Any, str] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("Authorization must be 'Bearer <agent token>'.")
        try:
            token = parts[1].decode()
        except UnicodeDecodeError as error:
            raise exceptions.AuthenticationFailed("The agent token must be ASCII.") from error
        node = protocol.node_for_token(token)
        if node is None:
            # Not a node's token: the bootstrap secret, or nothing. An address with too many
            # failures lately is not let try (the secret is checked only below the limit).
            wait = throttling.agent_auth_refused(request)
            if wait is not None:
                raise exceptions.Throttled(wait=wait, detail=throttling.agent_auth_refusal(wait))
            if protocol.is_bootstrap_secret(token):
                return BootstrapPrincipal(), token
            throttling.agent_auth_failed(request)
            # Retiring a node revokes its agent's token: say so (409), not "unknown token". The
            # node is named by the path (heartbeat, report) or by a registration's body.
            context = getattr(request, "parser_context", None) or {}
            name = context.get("kwargs", {}).get("name")
            if name is None and isinstance(context.get("view"), RegisterView) and isinstance(request.data, dict):
                name = request.data.get("name")
            # (a name PostgreSQL cannot hold, NUL or a lone surrogate, names no node: until 5 Dec
            # looking it up made an unknown token's request a 500 instead of this 401)
            if _may_name_a_node(name):
                _refuse_if_retired(Node.objects.filter(name=name, state=NodeState.RETIRED).first())
            raise exceptions.AuthenticationFailed(
                "Unknown agent token: it was never issued or a newer registration replaced it; "
                "register again with the bootstrap secret."
            )
        return AgentPrincipal(node), token

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="qm-agent"'


def _refuse_if_retired(node: Node | None) -> None:
    if node is not None and node.state == NodeState.RETIRED:
        raise retired_conflict(protocol.NodeRetired(node))


def retired_conflict(error: protocol.NodeRetired) -> Conflict:
    """409 `node_retired`, with how long to wait before asking again: the Retry-After header and
    `retry_after` in the body (services/nodes.retired_retry_after_s)."""
    conflict = Conflict(str(error), code="node_retired")
    conflict.wait = nodes_service.retired_retry_after_s(error.node)  # type: ignore[attr-defined] # DRF's Retry-After
    return conflict


class MayRegister(BasePermission):
    message = "Registering a node needs the bootstrap secret or that node's own agent token."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.user, AgentPrincipal | BootstrapPrincipal)


class IsThisNodesAgent(BasePermission):
    """An agent may touch only its own node's endpoints."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        user = request.user
        if isinstance(user, BootstrapPrincipal):
            self.message = "The bootstrap secret only registers nodes; use the node token register returned."
            return False
        if not isinstance(user, AgentPrincipal):
            self.message = "Node endpoints need the node's agent token."
            return False
        if user.node.name != view.kwargs.get("name"):
            self.message = (
                f"This token belongs to the agent of node {user.node.name!r}; it may not act for "
                f"node {view.kwargs.get('name')!r}."
            )
            return False
        return True


class AgentJSONParser(BoundedJSONParser):
    """JSON bounded by MAX_AGENT_BODY_BYTES (`nodes/heartbeats` and `nodes/wait` carry their
    tokens inside the body, so it is decoded before anyone is known), NaN and Infinity refused,
    and a body nested deeper than the decoder goes a 400 as any malformed JSON is (until 5 Dec
    `[` × 100,000 made every agent endpoint a 500)."""

    max_body_bytes = MAX_AGENT_BODY_BYTES


class AgentView(APIView):
    authentication_classes = [AgentTokenAuthentication]
    parser_classes = [AgentJSONParser]
    renderer_classes = [JSONRenderer]
    throttle_classes: list[Any] = []
    schema = None  # machine-to-machine; documented in docs/operations.md, not in the user API schema

    def get_exception_handler(self) -> Any:
        return exception_handler

    def handle_exception(self, exc: Exception) -> Response:
        if isinstance(exc, OperationalError | InterfaceError):
            # The database is restarting or unreachable (or chose this request as a deadlock
            # victim): the step that failed was rolled back whole, earlier steps stand, and
            # every report is idempotent, so the agent just resends.
            log.warning("agent request hit a database error", path=self.request.path,
                        error=f"{type(exc.__cause__ or exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            return Response(
                {"detail": "The database is unavailable; resend the request shortly (reports are applied "
                           "idempotently, so a resent one never counts twice).", "code": "database_unavailable"},
                status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "1"},
            )
        return super().handle_exception(exc)


# ------------------------------------------------------------------------------------- payloads


#: A job's steps and useful tokens are PostgreSQL bigints (Job.steps, Job.useful_tokens).
MAX_COUNT = 2**63 - 1
#: A node's CPUs and memory are integer columns (Node.cpus, Node.memory_gb).
MAX_INTEGER_COLUMN = 2**31 - 1
#: A log chunk's offset is a bigint, and so is the end of the chunk after it.
MAX_LOG_OFFSET = 2**63 - 1 - job_logs.CHUNK_BYTES
#: A generation is a bigint (Allocation.generation, JobLogChunk.generation): one beyond names no
#: run there can ever be, and is refused (400) rather than told "stale".
MAX_GENERATION = 2**63 - 1
#: The most GPUs a node declares (`gpu_count`); a device's index is below it.
MAX_GPUS = 1024


class DeviceSerializer(serializers.Serializer):
    # Only logged (the node's registration event), but bounded as the columns of the inventory
    # are: until 5 Dec an index of 2**63 or 10**30 MB went into the event as given.
    index = WholeNumberField(min_value=0, max_value=MAX_GPUS - 1)
    # Text by the one rule for it (services/plain_text.py), as every text the API takes.
    name = TextField(max_length=128, required=False, allow_blank=True)
    uuid = TextField(max_length=128, required=False, allow_blank=True)
    memory_mb = WholeNumberField(min_value=0, max_value=MAX_INTEGER_COLUMN, required=False)


def _generations() -> serializers.ListField:
    """What an agent says it runs: generations, each at most a bigint."""
    return serializers.ListField(child=WholeNumberField(min_value=1, max_value=MAX_GENERATION),
                                 required=False, max_length=4096)


class RegisterSerializer(serializers.Serializer):
    name = serializers.RegexField(NODE_NAME_PATTERN, max_length=128, error_messages={"invalid": NODE_NAME_MESSAGE})
    # Pool and switches are names people read: one line of visible text (models/names.py), as
    # the admin and the API's nodes/ take them.
    pool = NameField(max_length=64, required=False)
    gpu_type = TextField(max_length=64, required=False)
    gpu_count = WholeNumberField(min_value=1, max_value=MAX_GPUS, required=False)
    # (Node.cpus and Node.memory_gb are integer columns: one beyond was a 500, "integer out of range")
    cpus = WholeNumberField(min_value=0, max_value=MAX_INTEGER_COLUMN, required=False)
    memory_gb = WholeNumberField(min_value=0, max_value=MAX_INTEGER_COLUMN, required=False)
    leaf_switch = NameField(max_length=64, required=False)
    spine = NameField(max_length=64, required=False)
    capacity_tier = serializers.ChoiceField(choices=CapacityTier.choices, required=False)
    simulated = YesOrNoField(required=False, allow_null=True, default=None)
    devices = DeviceSerializer(many=True, required=False, max_length=MAX_GPUS)
    running = _generations()
    # When the agent killed its work itself because it could not renew its lease, if it did
    # since it last registered: what this registration settles was lost to a partition.
    self_fenced_at = serializers.DateTimeField(required=False, allow_null=True)
    # The runs an agent of this node launched whose start or end the control plane may not have
    # heard of (its launch journal, controlplane/agent/launch_journal.py): never given to start
    # again. Given (even empty), the agent vouches nothing else was launched here unknown to the
    # control plane; absent (an agent before 8 Dec), it does not (agent_protocol._vouches_for_launches).
    launched = _generations()
    # Which host the agent runs on (its machine id and host name): a bootstrap registration from
    # another host than the node's serving agent's, while that lease runs, is refused (409).
    host = TextField(max_length=200, required=False, allow_blank=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # Each device once: a second entry of one index is named (devices.3.index), with the first.
        first: dict[int, int] = {}
        twice: dict[int, dict[str, list[str]]] = {}
        for position, device in enumerate(attrs.get("devices", [])):
            earlier = first.setdefault(device["index"], position)
            if earlier != position:
                twice[position] = {"index": [f"Device index {device['index']} is given twice (also devices.{earlier})."]}
        if twice:
            raise serializers.ValidationError({"devices": twice})
        return attrs


class ReportSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=protocol.REPORT_KINDS)
    generation = WholeNumberField(min_value=1, max_value=MAX_GENERATION)
    at = serializers.DateTimeField()
    exit_code = WholeNumberField(required=False, allow_null=True, min_value=-255, max_value=255)
    # (bigint columns: one beyond was a 500 from PostgreSQL's "bigint out of range")
    steps = WholeNumberField(required=False, allow_null=True, min_value=0, max_value=MAX_COUNT)
    useful_tokens = WholeNumberField(required=False, allow_null=True, min_value=0, max_value=MAX_COUNT)
    last_checkpoint_at = serializers.DateTimeField(required=False, allow_null=True)
    started_at = serializers.DateTimeField(required=False, allow_null=True)
    gpu_activity = serializers.FloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0)
    # The agent's words (a launch failure's reason): text of several lines by the one rule for
    # text, so no escape or bidirectional control reaches the events people read.
    message = TextField(required=False, allow_blank=True, max_length=500, lines=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        kind = attrs["kind"]
        if kind == "exited" and "exit_code" not in attrs:
            raise serializers.ValidationError({"exit_code": "An 'exited' report needs the exit code."})
        if kind == "sample":
            if attrs.get("started_at") is None:
                raise serializers.ValidationError({"started_at": "A 'sample' report needs the interval's start."})
            if attrs["started_at"] >= attrs["at"]:
                raise serializers.ValidationError({"started_at": "A sample's start must be before its end ('at')."})
            if attrs.get("gpu_activity") is None:
                raise serializers.ValidationError({"gpu_activity": "A 'sample' report needs the device activity, 0..1."})
        return attrs


class LogChunkSerializer(serializers.Serializer):
    """New output of one rank of one run: `bytes` bytes from byte `offset` on, as UTF-8 text."""

    generation = WholeNumberField(min_value=1, max_value=MAX_GENERATION)
    rank = WholeNumberField(min_value=0, max_value=1_000_000)
    offset = WholeNumberField(min_value=0, max_value=MAX_LOG_OFFSET)
    bytes = WholeNumberField(min_value=1, max_value=job_logs.CHUNK_BYTES)
    # The job's own output, kept as it printed it (colours, carriage returns and all): the one
    # rule for text is not its rule. Still text PostgreSQL stores: no NUL, no lone surrogate.
    text = TextField(trim_whitespace=False, max_length=job_logs.CHUNK_BYTES, any_character=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # Each byte the agent read decodes to one character at most (U+FFFD for one it cannot):
        # more characters than `bytes` are not that output. Until 5 Dec 256 chunks saying 1 byte
        # and carrying 64 Ki characters each were stored whole, past the 1 MiB a contact may bring.
        if len(attrs["text"]) > attrs["bytes"]:
            raise serializers.ValidationError({"text": f"{len(attrs['text'])} characters are more than the "
                                                       f"{attrs['bytes']} bytes the chunk says it holds (bytes)."})
        return attrs


class SyncSerializer(serializers.Serializer):
    running = _generations()
    reports = ReportSerializer(many=True, required=False, max_length=MAX_REPORTS)
    logs = LogChunkSerializer(many=True, required=False, max_length=MAX_LOG_CHUNKS)
    goodbye = YesOrNoField(required=False, default=False)
    # The agent is stopping its jobs to shut down: the node takes no new work from now.
    shutting_down = YesOrNoField(required=False, default=False)
    # The `version` of the last reply whose allocations the agent holds: while it is still
    # current, the reply says `unchanged` and carries no allocations.
    known = TextField(max_length=64, required=False, allow_blank=True, allow_null=True)

    def validate_logs(self, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if sum(c["bytes"] for c in chunks) > MAX_LOG_BYTES:
            raise serializers.ValidationError(f"At most {MAX_LOG_BYTES} bytes of output per contact; send the "
                                              "rest with the next one.")
        return chunks


# --- the fast path
#
# Every agent request carries a few to a few hundred reports, and DRF's serializers cost
# ~0.3 ms of CPU per report: a third of a busy agent endpoint's time. Well-formed bodies (what
# qm-agent sends) are checked here in plain Python with exactly the serializers' rules; anything
# else — a wrong type, a value out of range, a missing field — goes through the serializers,
# which then name the field in their 400 as before. The fast path only ever accepts what the
# serializers accept.

_INT = int
_UTC = dt_timezone.utc


def _int_in(value: Any, low: int | None, high: int | None) -> bool:
    return (type(value) is _INT and (low is None or value >= low) and (high is None or value <= high))


def _when(value: Any) -> datetime | None:
    """An aware ISO 8601 datetime string → datetime (in UTC, as the serializer gives it); None
    when the serializer should judge it."""
    if type(value) is not str or len(value) > 64:
        return None
    try:
        parsed = parse_datetime(value)
    except ValueError:
        return None
    if parsed is None or parsed.tzinfo is None:
        return None
    try:
        return parsed.astimezone(_UTC)
    except OverflowError:
        return None


def _utf8(value: str) -> bool:
    """Whether `value` has a UTF-8 form: JSON may carry a lone surrogate (`"\\ud800"`), which
    neither PostgreSQL nor a token's hash takes. The CharField refuses it (400 naming the field);
    until 5 Dec the fast path let it through, and a log chunk, a batch item's name or token, or
    a launch failure's words holding one made the agent's whole contact a 500."""
    if value.isascii():
        return True
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def _may_name_a_node(name: Any) -> bool:
    """Whether `name` is text that may name a node, to be looked up: by the one rule for text
    (services/plain_text.py: a NUL, which PostgreSQL cannot compare, among what it refuses), and
    with a UTF-8 form. No node's name breaks the rule (models/names.py)."""
    return isinstance(name, str) and name != "" and ONE_LINE_REFUSED.search(name) is None and _utf8(name)


def _plain_text(value: Any, max_length: int, *, blank: bool, lines: bool = False, any_character: bool = False) -> bool:
    """A string the TextField would take unchanged: it trims whitespace, refuses lone surrogates,
    and reads text by the one rule for it (services/plain_text.py: no control character, line
    separator or bidirectional control; with `lines`, new lines and tabs are the text's own);
    with `any_character` (a token), refuses only NUL, as the CharField under it does."""
    if type(value) is not str or len(value) > max_length or (not blank and value == "") or value != value.strip():
        return False
    refused = "\x00" in value if any_character else (LINES_REFUSED if lines else ONE_LINE_REFUSED).search(value)
    return not refused and _utf8(value)


_OPTIONAL_INTS = (("exit_code", -255, 255), ("steps", 0, MAX_COUNT), ("useful_tokens", 0, MAX_COUNT))
_OPTIONAL_TIMES = ("last_checkpoint_at", "started_at")


def _fast_report(item: Any) -> dict[str, Any] | None:
    if type(item) is not dict:
        return None
    kind = item.get("kind")
    if kind not in protocol.REPORT_KINDS or not _int_in(item.get("generation"), 1, MAX_GENERATION):
        return None
    at = _when(item.get("at"))
    if at is None:
        return None
    out: dict[str, Any] = {"kind": kind, "generation": item["generation"], "at": at}
    for name, low, high in _OPTIONAL_INTS:
        if name in item:
            value = item[name]
            if value is not None and not _int_in(value, low, high):
                return None
            out[name] = value
    for name in _OPTIONAL_TIMES:
        if name in item:
            value = item[name]
            if value is not None:
                value = _when(value)
                if value is None:
                    return None
            out[name] = value
    if "gpu_activity" in item:
        value = item["gpu_activity"]
        if value is not None:
            if type(value) not in (int, float) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
                return None
            value = float(value)
        out["gpu_activity"] = value
    if "message" in item:
        value = item["message"]
        if not _plain_text(value, 500, blank=True, lines=True):
            return None
        out["message"] = value
    if kind == "exited" and "exit_code" not in out:
        return None
    if kind == "sample" and (out.get("started_at") is None or out["started_at"] >= at
                             or out.get("gpu_activity") is None):
        return None
    return out


def _fast_logs(raw: Any) -> list[dict[str, Any]] | None:
    """LogChunkSerializer's rules (its text is the job's output, exempt from the rule for text but
    for NUL), or None: ask the serializer."""
    if type(raw) is not list or len(raw) > MAX_LOG_CHUNKS:
        return None
    total = 0
    for item in raw:
        if type(item) is not dict or len(item) != 5:
            return None
        nbytes, text = item.get("bytes"), item.get("text")
        if not (_int_in(item.get("generation"), 1, MAX_GENERATION) and _int_in(item.get("rank"), 0, 1_000_000)
                and _int_in(item.get("offset"), 0, MAX_LOG_OFFSET) and _int_in(nbytes, 1, job_logs.CHUNK_BYTES)
                and type(text) is str and 0 < len(text) <= nbytes and "\x00" not in text and _utf8(text)):
            return None
        total += nbytes
    return raw if total <= MAX_LOG_BYTES else None


def _fast_sync(data: Any, *, batch_item: bool = False) -> dict[str, Any] | None:
    """SyncSerializer's (or BatchItemSerializer's) validated data, or None: ask the serializer."""
    if type(data) is not dict:
        return None
    out: dict[str, Any] = {"goodbye": False, "shutting_down": False}
    if "running" in data:
        running = data["running"]
        if type(running) is not list or len(running) > 4096 or not all(_int_in(g, 1, MAX_GENERATION) for g in running):
            return None
        out["running"] = running
    if "reports" in data:
        raw = data["reports"]
        if type(raw) is not list or len(raw) > MAX_REPORTS:
            return None
        reports = []
        for item in raw:
            report = _fast_report(item)
            if report is None:
                return None
            reports.append(report)
        out["reports"] = reports
    if "logs" in data:
        logs = _fast_logs(data["logs"])
        if logs is None:
            return None
        out["logs"] = logs
    for flag in ("goodbye", "shutting_down"):
        if flag in data:
            if type(data[flag]) is not bool:
                return None
            out[flag] = data[flag]
    if "known" in data:
        known = data["known"]
        if known is not None and not _plain_text(known, 64, blank=True):
            return None
        out["known"] = known
    if batch_item:
        name, token = data.get("name"), data.get("token")
        if not _plain_text(name, 128, blank=False) or not _plain_text(token, 256, blank=False, any_character=True):
            return None
        out["name"], out["token"] = name, token
        renew = data.get("renew", True)
        if type(renew) is not bool:
            return None
        out["renew"] = renew
    return out


def _validated_sync(data: Any) -> dict[str, Any]:
    fast = _fast_sync(data)
    if fast is not None:
        return fast
    payload = SyncSerializer(data=data)
    payload.is_valid(raise_exception=True)
    return dict(payload.validated_data)


def _validated_batch(data: Any) -> list[dict[str, Any]]:
    nodes = data.get("nodes") if type(data) is dict else None
    if type(nodes) is list and len(nodes) <= MAX_BATCH:
        items = [_fast_sync(item, batch_item=True) for item in nodes]
        if all(item is not None for item in items):
            return items  # type: ignore[return-value]
    payload = BatchSerializer(data=data)
    payload.is_valid(raise_exception=True)
    return list(payload.validated_data["nodes"])


def _store_logs(batches: list[tuple[Node, list[dict[str, Any]]]], now: datetime) -> None:
    """The contacts' output chunks, stored before their reports are applied: a job's last lines
    are in before the exit that ends it, so whoever follows its output reads them."""
    job_logs.store_many([
        (node.pk, node.name, [job_logs.Chunk(c["generation"], c["rank"], c["offset"], c["bytes"], c["text"])
                              for c in chunks])
        for node, chunks in batches if chunks
    ], now=now)


def _clamp(at: datetime | None, now: datetime) -> datetime | None:
    if at is None:
        return None
    return now if at > now + MAX_CLOCK_SKEW else min(at, now)


def _reports(data: list[dict[str, Any]], now: datetime) -> list[protocol.Report]:
    reports = []
    for item in data:
        at = _clamp(item["at"], now)
        assert at is not None
        started = _clamp(item.get("started_at"), now)
        if item["kind"] == "sample" and (started is None or started >= at):
            continue  # the whole interval lay in the agent's future: nothing to account
        reports.append(
            protocol.Report(
                kind=item["kind"],
                generation=item["generation"],
                at=at,
                exit_code=exit_codes.from_report(item.get("exit_code")),
                steps=item.get("steps"),
                useful_tokens=item.get("useful_tokens"),
                last_checkpoint_at=_clamp(item.get("last_checkpoint_at"), now),
                started_at=started,
                gpu_activity=item.get("gpu_activity"),
                message=item.get("message", ""),
            )
        )
    return reports


# ------------------------------------------------------------------------------------- views


class RegisterView(AgentView):
    permission_classes = [MayRegister]

    def post(self, request: Request) -> Response:
        payload = RegisterSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        inventory = protocol.Inventory(
            pool=data.get("pool"),
            gpu_type=data.get("gpu_type"),
            gpu_count=data.get("gpu_count"),
            cpus=data.get("cpus"),
            memory_gb=data.get("memory_gb"),
            leaf_switch=data.get("leaf_switch"),
            spine=data.get("spine"),
            capacity_tier=data.get("capacity_tier"),
            simulated=data.get("simulated"),
            devices=tuple(dict(d) for d in data.get("devices", [])),
        )
        try:
            registration = protocol.register(
                data["name"], inventory, token=request.auth, running=data.get("running", []), now=timezone.now(),
                self_fenced_at=data.get("self_fenced_at"), launched=data.get("launched"),
                host=data.get("host", ""),
            )
        except protocol.InvalidAgentRequest as error:
            raise exceptions.ValidationError(error.errors) from error
        except protocol.AgentForbidden as error:
            raise exceptions.PermissionDenied(str(error)) from error
        except protocol.AgentAuthError as error:
            raise exceptions.AuthenticationFailed(str(error)) from error
        except protocol.NodeRetired as error:
            raise retired_conflict(error) from error
        except protocol.NodeServedElsewhere as error:
            conflict = Conflict(str(error), code="node_served_elsewhere")
            conflict.wait = error.retry_after_s  # type: ignore[attr-defined] # DRF's Retry-After
            raise conflict from error
        node = registration.node
        return Response(
            {
                "node": node.name,
                "token": registration.token,
                "node_state": node.state,
                "lease_expires_at": registration.lease_expires_at.isoformat(),
                "lease_s": protocol.lease_seconds(),
                "heartbeat_interval_s": protocol.heartbeat_interval_seconds(),
                "settled_generations": registration.released,
            },
            status=status.HTTP_201_CREATED,
        )


class _SyncView(AgentView):
    permission_classes = [IsThisNodesAgent]
    renew = False

    def post(self, request: Request, name: str) -> Response:
        try:
            data = _validated_sync(request.data)
        except exceptions.ValidationError as error:
            protocol.contact_refused(request.user.node, flatten(error.detail), request.data, now=timezone.now())
            raise
        now = timezone.now()
        _store_logs([(request.user.node, data.get("logs") or [])], now)
        # No transaction around the whole call: each step takes its own locks in the global
        # order (lease → node → allocation → job → GPUs), see services/agent_protocol.py.
        desired = protocol.sync(
            request.user.node,
            reports=_reports(data.get("reports", []), now),
            running=protocol.parse_running(data.get("running", [])),
            renew=self.renew,
            goodbye=data.get("goodbye", False),
            shutting_down=data.get("shutting_down", False),
            now=now,
            known=data.get("known") or None,
        )
        return Response(desired.as_json())


class HeartbeatView(_SyncView):
    renew = True


class ReportView(_SyncView):
    renew = False


class BatchItemSerializer(SyncSerializer):
    name = TextField(max_length=128)
    token = TextField(max_length=256, any_character=True)  # a secret: never shown, any character its own
    renew = YesOrNoField(required=False, default=True)


class BatchSerializer(serializers.Serializer):
    nodes = BatchItemSerializer(many=True, max_length=MAX_BATCH)


class BatchSyncView(AgentView):
    """Heartbeats and reports of many nodes in one request: for an agent process that speaks
    for several nodes (`qm-agent --simulate N`). Each item carries its own node's token and is
    authenticated alone, exactly as on the per-node endpoints; an item whose token does not
    open its node gets a 401/403 result of its own, and the others proceed. A request with
    tokens that open no node counts one failure against its address (`agent_auth`); beyond the
    limit those items' results are 429 with `retry_after`."""

    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    def post(self, request: Request) -> Response:
        try:
            items = _validated_batch(request.data)
        except exceptions.ValidationError as error:
            _batch_refused(request.data, flatten(error.detail))
            raise
        now = timezone.now()
        nodes = {n.name: n for n in Node.objects.filter(name__in={i["name"] for i in items})}
        results: list[dict[str, Any] | None] = [None] * len(items)
        accepted: list[tuple[int, protocol.SyncRequest]] = []
        unknown: list[int] = []
        for index, item in enumerate(items):
            node = nodes.get(item["name"])
            if node is None or not protocol.token_opens(node, item["token"]):
                known = protocol.node_for_token(item["token"])
                if known is None:
                    unknown.append(index)
                if known is None and node is not None and node.state == NodeState.RETIRED:
                    results[index] = {"node": item["name"], "status": 409, "code": "node_retired",
                                      "detail": str(protocol.NodeRetired(node)),
                                      "retry_after": nodes_service.retired_retry_after_s(node, now)}
                    continue
                status_code, detail = (
                    (403, f"This token belongs to the agent of node {known.name!r}; it may not act for node {item['name']!r}.")
                    if known is not None else (401, "Unknown agent token: register again with the bootstrap secret.")
                )
                results[index] = {"node": item["name"], "status": status_code, "detail": detail}
                continue
            accepted.append((index, protocol.SyncRequest(
                node=node, reports=_reports(item.get("reports", []), now),
                running=protocol.parse_running(item.get("running", [])), renew=item.get("renew", True),
                goodbye=item.get("goodbye", False), known=item.get("known") or None,
                shutting_down=item.get("shutting_down", False),
            )))
        _refuse_unknown_tokens(request, [results[index] for index in unknown])
        _store_logs([(r.node, items[index].get("logs") or []) for index, r in accepted], now)
        for (index, _), desired in zip(accepted, protocol.sync_many([r for _, r in accepted], now=now), strict=True):
            results[index] = {"status": 200, **desired.as_json()}
        return Response({"results": results})


def _batch_refused(data: Any, errors: dict[str, list[str]]) -> None:
    """A batch refused (400) for some items: each item named whose token opens its node records
    the node's refused contact (`contact_refused`), its fields as its own contact's. An item
    whose token opens nothing records nothing: anyone may name any node in a body."""
    items = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return
    mine: dict[int, dict[str, list[str]]] = {}
    for name, problems in errors.items():
        head, _, rest = name.partition(".")
        index, _, field = rest.partition(".")
        if head == "nodes" and index.isdigit() and int(index) < len(items) and field not in ("name", "token"):
            mine.setdefault(int(index), {})[field] = problems
    now = timezone.now()
    for index, fields in sorted(mine.items()):
        item = items[index]
        name, token = (item.get("name"), item.get("token")) if isinstance(item, dict) else (None, None)
        if not (_may_name_a_node(name) and isinstance(token, str) and _utf8(token)):
            continue
        node = Node.objects.filter(name=name).first()
        if node is not None and protocol.token_opens(node, token):
            protocol.contact_refused(node, fields, item, now=now)


def _refuse_unknown_tokens(request: Request, unknown: list[dict[str, Any] | None]) -> None:
    """A batch's items whose tokens open no node: one failure for the request against its
    address, or, beyond the limit, each such item's 401 a 429 with `retry_after` (a retired
    node's 409 stays: it tells its agent more)."""
    if not unknown:
        return
    wait = throttling.agent_auth_refused(request)
    if wait is None:
        throttling.agent_auth_failed(request)
        return
    for result in unknown:
        if result is not None and result["status"] == 401:
            result.update(status=429, detail=throttling.agent_auth_refusal(wait), retry_after=math.ceil(wait))


class WaitItemSerializer(serializers.Serializer):
    name = TextField(max_length=128)
    token = TextField(max_length=256, any_character=True)  # a secret: never shown, any character its own
    # With `desired`: what the agent runs and the version it holds, as in a heartbeat.
    running = _generations()
    known = TextField(max_length=64, required=False, allow_blank=True, allow_null=True)


class WaitSerializer(serializers.Serializer):
    nodes = WaitItemSerializer(many=True, min_length=1, max_length=4096)
    since = WholeNumberField(min_value=0, required=False, allow_null=True, default=None)
    timeout_s = serializers.FloatField(min_value=0.0, max_value=agent_wakeups.MAX_WAIT_S, required=False, default=20.0)
    # The reply carries each woken node's desired state (what a report with no reports would
    # answer), so the agent needs no request of its own to fetch it.
    desired = YesOrNoField(required=False, default=False)


#: A held wait's connection is probed (TCP keepalive) once it has carried nothing for
#: KEEPALIVE_IDLE_S, then every KEEPALIVE_INTERVAL_S, and given up by the kernel after
#: KEEPALIVE_PROBES unanswered: an agent whose host vanished is seen gone ~8 s after its request.
KEEPALIVE_IDLE_S, KEEPALIVE_INTERVAL_S, KEEPALIVE_PROBES = 5, 1, 3


def _agent_gone(request: Request) -> Callable[[], bool] | None:
    """Whether the agent holding this wait has gone (killed, restarted, its wait given up; its
    host vanished), so the wait can give its thread back at once instead of at its timeout.
    gunicorn hands the request its client socket (`gunicorn.socket`, sync and gthread workers);
    a closed peer shows as POLLRDHUP on it (Linux), whatever a TLS layer above says, and a
    request's body has been read whole by now, so nothing else arrives on it. A peer that
    vanished without closing (a host powered off, a network cut) sends no FIN: the keepalive
    probes set here go unanswered, and the kernel fails the socket (POLLERR, ETIMEDOUT) about
    KEEPALIVE_IDLE_S + KEEPALIVE_PROBES × KEEPALIVE_INTERVAL_S after its last traffic. None
    where it cannot be told: another server (the tests' live server, `runserver`), another OS."""
    sock = request.META.get("gunicorn.socket")
    rdhup = getattr(select, "POLLRDHUP", None)
    try:
        fd = sock.fileno() if sock is not None and rdhup is not None else -1
    except OSError:
        fd = -1
    if fd < 0:
        return None
    _probe_while_idle(sock)
    watch = select.poll()
    watch.register(fd, rdhup)

    def gone() -> bool:
        happened = 0
        for _, events in watch.poll(0):
            happened |= events
        if happened & select.POLLERR:
            # Read, the socket's error is cleared: gunicorn's write of the reply then meets
            # EPIPE, which it passes over, not the probes' ETIMEDOUT, which it logs as an error
            # with a traceback for every vanished host.
            try:
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            except OSError:
                pass
        return bool(happened & (rdhup | select.POLLHUP | select.POLLERR))

    return gone


def _probe_while_idle(sock: socket.socket) -> None:
    """TCP keepalive on a wait's connection (it stays on for the connection's next requests).
    Not on a Unix socket (a proxy in front: its own connection to the agent is not ours)."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not hasattr(socket, "TCP_KEEPIDLE"):
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, KEEPALIVE_IDLE_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, KEEPALIVE_INTERVAL_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, KEEPALIVE_PROBES)
    except OSError:
        pass


class WaitView(AgentView):
    """A long poll: answered as soon as a commit gives one of these nodes new work or asks it
    to stop something (or after `timeout_s`; under gunicorn, once its agent has closed the
    connection, `_agent_gone`: nobody reads that reply, and its thread is free again). The reply names the nodes woken and the sequence
    number to wait from next; with `desired`, it also carries each woken node's desired state
    (computed from the item's `running` and `known`, as a report would be), else the agent
    fetches it with a report or a heartbeat. Each item carries its node's token (one agent, or
    a process simulating many nodes); a node whose token does not open it is listed in
    `refused`, and counts one failure for the request against its address (`agent_auth`):
    beyond the limit a request none of whose tokens opens its node is a 429, not a 401."""

    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    def post(self, request: Request) -> Response:
        payload = WaitSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        items = data["nodes"]
        nodes = {n.name: n for n in Node.objects.filter(name__in={i["name"] for i in items}).only(
            "id", "name", "agent_token_hash")}
        ids: dict[int, str] = {}
        refused: list[str] = []
        for item in items:
            node = nodes.get(item["name"])
            if node is None or not protocol.token_opens(node, item["token"]):
                refused.append(item["name"])
            else:
                ids[node.pk] = node.name
        if refused:
            wait = throttling.agent_auth_refused(request)
            if wait is None:
                throttling.agent_auth_failed(request)
            elif not ids:
                raise exceptions.Throttled(wait=wait, detail=throttling.agent_auth_refusal(wait))
        if not ids:
            return Response({"detail": "No item's token opens its node: register again.", "refused": refused},
                            status=status.HTTP_401_UNAUTHORIZED)
        # The thread keeps its database connection (idle) while it waits, as between requests:
        # closing it would cost every wait a new PostgreSQL backend.
        try:
            woken, seq = agent_wakeups.wait_for_wake(list(ids), data["since"], data["timeout_s"],
                                                     gone=_agent_gone(request))
        except agent_wakeups.WaitsExhausted:
            return Response({"detail": "This web process holds as many agent waits as it may; heartbeats go on as "
                                       "usual. Retry later.", "code": "waits_exhausted"},
                            status=status.HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": "5"})
        except Exception as error:  # noqa: BLE001 - Redis unreachable: the agent heartbeats meanwhile
            log.warning("agent wait failed", error=f"{type(error).__name__}: {error}")
            return Response({"detail": "Wake-ups are unavailable; heartbeats go on as usual.",
                             "code": "wake_unavailable"}, status=status.HTTP_503_SERVICE_UNAVAILABLE,
                            headers={"Retry-After": "2"})
        reply: dict[str, Any] = {"woken": sorted(ids[n] for n in woken), "seq": seq, "refused": refused}
        if data["desired"] and woken:
            reply["desired"] = self._desired(woken, {i["name"]: i for i in items})
        return Response(reply)

    @staticmethod
    def _desired(woken: list[int], items: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Each woken node's desired state, read after the commit that woke it: exactly the
        reply to a report carrying no reports (no lease renewal: a wait is not a heartbeat)."""
        nodes = list(Node.objects.filter(pk__in=woken).order_by("pk"))
        requests = [protocol.SyncRequest(
            node=node, reports=(), running=protocol.parse_running(items[node.name].get("running", [])), renew=False,
            known=items[node.name].get("known") or None,
        ) for node in nodes]
        replies = protocol.sync_many(requests, now=timezone.now())
        return {node.name: desired.as_json() for node, desired in zip(nodes, replies, strict=True)}


urlpatterns = [
    path("nodes/wait", WaitView.as_view(), name="agent-wait"),
    path("nodes/heartbeats", BatchSyncView.as_view(), name="agent-heartbeats"),
    path("register", RegisterView.as_view(), name="agent-register"),
    path("nodes/<str:name>/heartbeat", HeartbeatView.as_view(), name="agent-heartbeat"),
    path("nodes/<str:name>/report", ReportView.as_view(), name="agent-report"),
]
