"""The agent's side of the HTTP protocol (server side: controlplane/api/agent.py).

Errors are typed by what the agent should do about them:
  - `Unauthorized` (401): the token is unknown; stop everything and register again;
  - `Refused` (400/403): the request itself is wrong; retrying it unchanged will not help. A
    400's `errors` name the fields at fault (`reports.3.message`, `logs.0.text`), so the agent
    can set aside the elements refused and send the rest (node.py, `NodeAgent._refused`);
  - `Retired` (409, code `node_retired`): an admin retired the node; nothing runs here until
    an admin returns it to service (a `Refused`);
  - `Throttled` (429; or a 502/503/504 carrying a usable Retry-After): not a refusal of the
    request but "slow down" or "not now" (too many failed agent authentications from this
    address, a proxy's rate limit, a control plane whose database is restarting, a load
    balancer in maintenance): the same request may succeed later; keep running meanwhile, as
    for `Unreachable`;
  - `Unreachable` (network error, timeout, any other 5xx): retryable; keep running until the
    lease ends.

`Retired` and `Throttled` carry `retry_after_s`: how long the control plane says to wait before
asking again (its `retry_after` in the body, or the Retry-After header: `retry_after_s`; a 5xx
only by its header), None when it said nothing usable. How long the agent then waits is
node.py's (`AskAgain`).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Any

import requests

CONNECT_TIMEOUT_S = 2.0
READ_TIMEOUT_S = 10.0
#: The most a request's body may hold: the control plane answers a larger one 413
#: (controlplane/api/agent.py, MAX_AGENT_BODY_BYTES), so a batch that would be larger is sent
#: in parts (:meth:`AgentClient.sync_many`).
MAX_BODY_BYTES = 5 * 1024 * 1024
#: 5xx answers that mean "not now" rather than "broken" when they say when to come back: a
#: control plane whose database is restarting (503 `database_unavailable`, Retry-After: 1), a
#: proxy or load balancer in maintenance or without a healthy backend. Without a usable
#: Retry-After they are `Unreachable`, as any other 5xx.
ASK_AGAIN_STATUSES = frozenset({502, 503, 504})


class ProtocolError(Exception):
    """Base of the agent's protocol errors."""


class Unreachable(ProtocolError):
    """The control plane did not answer usefully; retry later (the lease decides how long)."""


class Unauthorized(ProtocolError):
    """The token was refused: the node must register again."""


class Refused(ProtocolError):
    """The control plane understood and refused the request (bad input, wrong node). `errors`:
    the fields at fault and their problems, as a 400's body names them (`{"reports.3.message":
    ["…"]}`; empty when it named none)."""

    def __init__(self, status: int, detail: str, errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.status = status
        self.detail = detail
        self.errors = errors or {}


class Retired(Refused):
    """The node is retired: the control plane refuses its agent until an admin returns it."""

    def __init__(self, status: int, detail: str, retry_after_s: float | None = None) -> None:
        super().__init__(status, detail)
        self.retry_after_s = retry_after_s


class Throttled(ProtocolError):
    """429: the control plane (or a proxy before it) asks for fewer requests from here; or a
    502/503/504 with a Retry-After: it cannot serve them now and says when to ask again. Not a
    `Refused`: the request was not judged, and the same one may be taken once the wait is over."""

    def __init__(self, detail: str, retry_after_s: float | None = None, status: int = 429) -> None:
        super().__init__(f"HTTP {status}: {detail}")
        self.detail = detail
        self.retry_after_s = retry_after_s
        self.status = status


def retry_after_s(value: Any, now: float | None = None) -> float | None:
    """A Retry-After (RFC 9110 10.2.3) in seconds from `now` (this machine's wall clock), or None
    when it says nothing usable. Seconds as the control plane writes them (a whole number; a
    JSON number or a decimal is taken too), or an HTTP-date (a date already past: 0). Negative,
    infinite or not a number at all: None. How long is too long is the caller's to bound
    (node.AskAgain): a parser that capped it would hide what the server said."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        seconds = _finite(value)
        return seconds if seconds is not None and seconds >= 0 else None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text[0] in "+-0123456789.":
        seconds = _finite(text)
        return seconds if seconds is not None and seconds >= 0 else None
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # an HTTP-date is GMT; the obsolete forms say so by convention only
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _errors(payload: Any) -> dict[str, list[str]]:
    """A 400 body's `errors` (controlplane/api/errors.py: field → its problems), or {}."""
    errors = payload.get("errors") if isinstance(payload, dict) else None
    if not isinstance(errors, dict):
        return {}
    return {str(field): [str(p) for p in problems] if isinstance(problems, list) else [str(problems)]
            for field, problems in errors.items()}


def error_for(status: int, payload: Any, retry_after: Any = None) -> ProtocolError:
    """The error for a 4xx answer (not 401) with its JSON body (or a batch item's result) and
    its Retry-After header, if any: `Throttled` for a 429, `Retired` for a 409 `node_retired`,
    else `Refused` (with the body's `errors`). The body's `retry_after` is taken before the header."""
    detail = str(payload.get("detail", payload)) if isinstance(payload, dict) else str(payload)
    told = retry_after_s(payload.get("retry_after")) if isinstance(payload, dict) else None
    if told is None:
        told = retry_after_s(retry_after)
    if status == 429:
        return Throttled(detail, told)
    if status == 409 and isinstance(payload, dict) and payload.get("code") == "node_retired":
        return Retired(status, detail, told)
    return Refused(status, detail, _errors(payload))


def _encoded(body: dict[str, Any]) -> bytes:
    """The body as requests' ``json=`` sent it: NaN and infinities are no JSON, and such a body
    is `Unreachable` as requests' InvalidJSONError made it."""
    try:
        return json.dumps(body, allow_nan=False).encode("utf-8")
    except ValueError as error:
        raise Unreachable(f"the request body is not JSON: {error}") from error


def _said(response: requests.Response, path: str) -> str:
    """What a 5xx answer says: its JSON `detail`, else its status's name (a proxy's page)."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("detail"), str):
        return f"{path}: {payload['detail']}"
    return f"{path}: HTTP {response.status_code} {response.reason or ''}".rstrip()


class AgentClient:
    """HTTP calls for one or many nodes. One `requests.Session` per thread (keep-alive)."""

    def __init__(self, server: str, *, timeout: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)) -> None:
        self.base = server.rstrip("/") + "/api/v1/agent/"
        self.timeout = timeout
        self._local = threading.local()

    def _session(self) -> requests.Session:
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            # What requests takes from the environment for this control plane (its proxy, with
            # NO_PROXY applied; REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE), read once: per request it
            # scanned the whole environment again, ~10 % of a busy agent's CPU
            # (bench/true_jobs.py). The agent never changes its environment, and every request
            # goes to this one host. ~/.netrc is no longer read: an entry for the control plane
            # there replaced the agent's Bearer token with Basic credentials.
            settings = session.merge_environment_settings(self.base, {}, None, None, None)
            session.trust_env = False
            session.proxies, session.verify, session.cert = settings["proxies"], settings["verify"], settings["cert"]
            self._local.session = session
        return session

    @contextmanager
    def within(self, seconds: float | None) -> Iterator[None]:
        """The calls this thread makes in the block give up after `seconds` at most, to connect
        and between two reads of the reply (None: their usual timeouts). An agent holding runs
        gives a call no longer than what is left before its self-fence (node.py, `NodeAgent.send`)."""
        previous = getattr(self._local, "within", None)
        self._local.within = seconds
        try:
            yield
        finally:
            self._local.within = previous

    def _post(self, path: str, token: str, body: dict[str, Any] | bytes,
              timeout: tuple[float, float] | None = None) -> dict[str, Any]:
        """POST ``body`` (a JSON object, or one already encoded) and return the reply's object."""
        data = body if isinstance(body, bytes) else _encoded(body)
        timeout = timeout or self.timeout
        within = getattr(self._local, "within", None)
        if within is not None:
            timeout = (min(timeout[0], within), min(timeout[1], within))
        try:
            response = self._session().post(
                self.base + path, data=data, timeout=timeout,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
        except requests.RequestException as error:
            # Drop the session: a half-dead keep-alive connection must not be reused.
            self._local.session = None
            raise Unreachable(f"{path}: {error.__class__.__name__}: {error}") from error
        if response.status_code >= 500:
            told = (retry_after_s(response.headers.get("Retry-After"))
                    if response.status_code in ASK_AGAIN_STATUSES else None)
            if told is None:
                raise Unreachable(f"{path}: HTTP {response.status_code}")
            raise Throttled(_said(response, path), told, status=response.status_code)
        try:
            payload = response.json()
        except ValueError as error:
            if response.status_code != 429:
                raise Unreachable(f"{path}: HTTP {response.status_code} with a body that is not JSON") from error
            # A proxy's rate limit (nginx, a load balancer) answers in HTML: still "slow down".
            payload = {"detail": f"{path}: HTTP 429 Too Many Requests"}
        if response.status_code == 401:
            raise Unauthorized(str(payload.get("detail", "unauthorized")))
        if response.status_code >= 400:
            raise error_for(response.status_code, payload, response.headers.get("Retry-After"))
        if not isinstance(payload, dict):
            raise Unreachable(f"{path}: expected a JSON object, got {type(payload).__name__}")
        return payload

    def register(self, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._post("register", token, body)

    def heartbeat(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._post(f"nodes/{node}/heartbeat", token, body)

    def report(self, node: str, token: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._post(f"nodes/{node}/report", token, body)

    def wait(self, items: list[dict[str, Any]], since: int | None, timeout_s: float,
             desired: bool = False) -> dict[str, Any]:
        """Long poll until a commit wakes one of these nodes (each item: `name`, `token`, and
        with `desired` the node's `running` and `known`: the reply then carries each woken
        node's desired state)."""
        body: dict[str, Any] = {"nodes": items, "since": since, "timeout_s": timeout_s}
        if desired:
            body["desired"] = True
        return self._post("nodes/wait", "-", body, timeout=(self.timeout[0], timeout_s + READ_TIMEOUT_S))

    def sync_many(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Heartbeats/reports of several nodes in one request; each item carries `name` and
        `token`. Returns one result per item, each with its own `status`. A batch whose body
        would pass MAX_BODY_BYTES goes in halves: the control plane would refuse it whole (413),
        and every node in it would go unheard until its lease ran out."""
        data = _encoded({"nodes": items})
        if len(data) > MAX_BODY_BYTES and len(items) > 1:
            half = len(items) // 2
            return self.sync_many(items[:half]) + self.sync_many(items[half:])
        payload = self._post("nodes/heartbeats", "-", data)
        results = payload.get("results")
        if not isinstance(results, list) or len(results) != len(items):
            raise Unreachable("nodes/heartbeats: the reply does not answer every node")
        return results
