"""The CLI's side of the API: where the server is, the stored token, and requests whose errors
come back as the API's own message.

The token lives in $XDG_CONFIG_HOME/quartermaster/config.json (default
~/.config/quartermaster/), readable by its owner only. QM_URL and QM_TOKEN override it. How long
a request may wait for the server's answer is --timeout, else QM_TIMEOUT, else 30 s.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from controlplane.cli import output
from controlplane.cli.slurm_flags import TYPED_AS_SLURMS

DEFAULT_URL = "http://localhost:8000"
#: The API's largest page (`?limit=`): a list longer than that is read page by page (`Api.pages`).
LARGEST_PAGE = 1000
#: How long a request waits to connect, and then for each read of the answer, unless --timeout
#: or $QM_TIMEOUT say otherwise (a slow VPN, a loaded server's big `qm history --format csv`).
TIMEOUT_S = 30.0
#: The most --timeout may be: an hour, as `--interval`'s; beyond that a server is not answering.
LONGEST_TIMEOUT_S = 3600.0
# Submits are retried on connection failures and gateway errors: the Idempotency-Key makes a
# retry return the first result, so a lost response never becomes a duplicate job.
RETRIES = 3
RETRY_STATUSES = {502, 503, 504}


class CliError(Exception):
    """Something to tell the user in one line; `exit_code` 1 for the server's refusals and failures,
    2 for no server (and for what qm refuses itself before asking: UsageError)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class UsageError(CliError):
    """What was typed (a flag's value, flags that do not go together, a job file, a missing
    argument) refused by qm itself before any request: exit 2, as argparse exits for what it
    refuses, so that a script tells a command typed wrong (2) from the server's refusal or a
    failure (1). Until 7 Dec these exited 1 while argparse's own refusals exited 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


class ApiError(CliError):
    def __init__(self, status: int, detail: str, errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.errors = errors or {}


#: A value typed longer than this is cut short where a refusal repeats it (a 300-character
#: `--reason` said twice over, once in the flag and once in "at most 200 characters").
ECHOED_VALUE_CHARS = 60


def refusal(error: ApiError, args: argparse.Namespace, flags: Mapping[str, str]) -> CliError:
    """A 400's field errors as `qm` says them, one field a line (the API's sentence says the
    same, so printing both said every problem twice). `flags` maps the command's API fields to
    the argparse names of the flags that set them (`{"runtime_limit_s": "time"}`): a field set
    by a flag given names the flag and its value, `runtime_limit_s (--time 8d)`, since the user
    typed the flag, not the field; an item of a list (`states.0`) is its list's flag, spelled as
    typed (`--mem-per-gpu`, not `--memory-per-gpu`; `-t`: main's `flags_typed` on `args`), with
    what qm's spelling of a Slurm flag means here (TYPED_AS_SLURMS: `-p`). A field no flag set (a
    YAML file's) reads as the API names it. Any other error is left as it is."""
    if error.status != 400 or not error.errors:
        return error
    typed: Mapping[str, str] = getattr(args, "flags_typed", None) or {}

    def dest_of(field: str) -> str | None:
        return flags.get(field) or flags.get(field.split(".")[0])

    def name(field: str) -> str:
        dest = dest_of(field)
        given = getattr(args, dest, None) if dest else None
        if dest is None or given is None or given is False or given == []:
            return field
        flag = typed.get(dest) or "--" + dest.replace("_", "-")
        if given is True:
            return f"{field} ({flag})"
        # Escaped here: a new line typed in a value would otherwise split the refusal's line.
        words = [output.visible(word) for word in (given if isinstance(given, list) else [given])]
        words = [word if len(word) <= ECHOED_VALUE_CHARS else word[:ECHOED_VALUE_CHARS - 1] + "…" for word in words]
        return f"{field} (" + " ".join(f"{flag} {word}" for word in words) + ")"

    def meant(field: str) -> str:
        dest = dest_of(field)
        note = TYPED_AS_SLURMS.get(typed.get(dest, "")) if dest and getattr(args, dest, None) else None
        return f"\n  {note}" if note else ""

    return CliError("Invalid request." + "".join(f"\n  {name(field)}: {' '.join(msgs)}{meant(field)}"
                                                 for field, msgs in error.errors.items()))


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "quartermaster" / "config.json"


def load_config() -> dict[str, Any]:
    path = config_path()
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read {path}: {exc}; run `qm login` again") from exc
    if not isinstance(data, dict):
        return {}
    wrong = sorted(k for k in ("url", "token", "username") if k in data and not isinstance(data[k], str | None))
    if wrong:  # edited by hand: `"url": 5` ended in an AttributeError traceback
        raise CliError(f"cannot read {path}: {', '.join(wrong)} should be text; run `qm login` again")
    return data


def save_config(data: dict[str, Any]) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Create it private before writing the token into it.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2)
    os.chmod(path, 0o600)
    return path


def request_timeout(flag: str | None) -> float:
    """The seconds a request waits for the server: `--timeout` as typed, else $QM_TIMEOUT, else
    TIMEOUT_S. A value that is not a number of seconds above 0 (at most an hour) is refused,
    naming where it came from, before any request is sent."""
    given, source = (flag, f"--timeout {flag}") if flag is not None else (
        os.environ.get("QM_TIMEOUT", ""), f"QM_TIMEOUT={os.environ.get('QM_TIMEOUT', '')}")
    if flag is None and not given.strip():
        return TIMEOUT_S
    try:
        seconds = float(given)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= LONGEST_TIMEOUT_S:  # NaN and inf fail here too
        raise CliError(f"{output.visible(source)[:80]}: give the seconds qm waits for the server's answer, "
                       f"a number above 0 and at most {LONGEST_TIMEOUT_S:g}", exit_code=2)
    return seconds


@dataclass
class Api:
    url: str
    token: str | None
    timeout_s: float = TIMEOUT_S
    #: True when no --url, $QM_URL or stored login named the server and `url` is DEFAULT_URL: a
    #: connection refused there means "log in", not "the server is down".
    url_defaulted: bool = False

    @classmethod
    def from_environment(cls, url: str | None = None, timeout_s: float = TIMEOUT_S) -> Api:
        config = load_config()
        named = url or os.environ.get("QM_URL") or config.get("url")
        base = server_url(named or DEFAULT_URL)
        token = os.environ.get("QM_TOKEN") or (config.get("token") if config.get("url", base) == base else None)
        return cls(base, token, timeout_s, url_defaulted=not named)

    def _unreachable(self, exc: Exception) -> CliError:
        if self.url_defaulted:
            return CliError(f"cannot reach {self.url}, qm's default address: no server was named (no --url, no "
                            "$QM_URL, no `qm login` yet). Log in to your fleet's server first: "
                            "qm login --url https://SERVER", exit_code=2)
        return CliError(f"cannot reach {self.url}: {_first_line(exc)}", exit_code=2)

    def request(self, method: str, path: str, *, body: Any = None, params: Any = None,
                headers: dict[str, str] | None = None, retry: bool = False, raw: bool = False,
                response_headers: dict[str, str] | None = None, binary: bool = False) -> Any:
        """Call the API and return its JSON (or text when `raw`, bytes when `binary`: a
        workbook); raise ApiError with the API's message on any 4xx/5xx, CliError when the
        server cannot be reached. A dict given as `response_headers` is filled with the answer's
        headers (names in lower case)."""
        raw = raw or binary
        url = f"{self.url}/api/v1/{path.lstrip('/')}"
        # A raw request asks for another format by `?format=` (CSV): accepting only JSON then
        # would be refused (406).
        all_headers = {"Accept": "*/*" if raw else "application/json", **(headers or {})}
        if self.token:
            all_headers["Authorization"] = f"Token {self.token}"
        attempts = RETRIES if retry else 1
        for attempt in range(1, attempts + 1):
            try:
                response = requests.request(method, url, json=body, params=params, headers=all_headers,
                                            timeout=self.timeout_s)
            except requests.ConnectionError as exc:
                if attempt < attempts:
                    time.sleep(0.5 * attempt)
                    continue
                raise self._unreachable(exc) from exc
            except requests.Timeout as exc:
                if attempt < attempts:
                    continue
                raise CliError(f"{self.url} did not answer within {self.timeout_s:g} s (--timeout SECONDS or "
                               "$QM_TIMEOUT to wait longer)", exit_code=2) from exc
            except requests.exceptions.InvalidHeader as exc:
                # Only the token goes into a header from outside: a pasted token with a new line.
                raise CliError("the token has characters no token has (a new line, a space?): check $QM_TOKEN, "
                               "or `qm login` again") from exc
            except requests.RequestException as exc:  # a URL requests cannot use, too many redirects…
                raise CliError(f"cannot reach {self.url}: {_first_line(exc)}", exit_code=2) from exc
            if response.status_code in RETRY_STATUSES and attempt < attempts:
                time.sleep(0.5 * attempt)
                continue
            if response_headers is not None:
                response_headers.update({k.lower(): v for k, v in response.headers.items()})
            if binary and response.status_code < 400:
                return response.content
            return self._result(response, raw)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def pages(self, path: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """GET `path` page by page from the `offset` in `params` (none: the first), until a page
        says there is no next one or comes back empty; `params` itself is left as it was."""
        params = dict(params)
        while True:
            page = self.request("GET", path, params=params)
            yield page
            if not page.get("next") or not page["results"]:
                return
            params["offset"] = params.get("offset", 0) + len(page["results"])

    def listed(self, path: str, params: dict[str, Any], want: int | None = None) -> dict[str, Any]:
        """`path`'s list as one answer: every row from the `offset` in `params` (none: the first)
        or the first `want` of them, read as pages of at most LARGEST_PAGE one after the other
        (the API cuts a larger `limit` to its largest page without saying so: one page printed
        as the whole list lost every row past the 1,000th). A row listed twice (a newer one came
        in between two reads and shifted the list by one) is kept once. `count` is the last
        read's, `next` the last read's (the rows after those), `previous` the first's (the rows
        before them). `qm list`, `events`, `maint list`, `nodes`, `quotas` and `notify list` read
        their rows here; `pages` is the same walk a page at a time, for a caller that reads ids as
        they come."""
        params = {key: value for key, value in params.items() if key != "limit"}
        offset = int(params.get("offset") or 0)
        rows: list[dict[str, Any]] = []
        seen: set[Any] = set()
        first: dict[str, Any] | None = None
        while True:
            room = LARGEST_PAGE if want is None else min(want - len(rows), LARGEST_PAGE)
            page = self.request("GET", path, params={**params, "limit": room, "offset": offset})
            first = first or page
            offset += len(page["results"])
            rows += [row for row in page["results"] if row.get("id") is None or row["id"] not in seen]
            seen.update(row.get("id") for row in page["results"])
            if not page.get("next") or not page["results"] or (want is not None and len(rows) >= want):
                return {**page, "previous": first.get("previous"),
                        "results": rows if want is None else rows[:want]}

    def _result(self, response: requests.Response, raw: bool) -> Any:
        if response.status_code >= 400:
            try:
                data = response.json()
            except ValueError:
                data = {"detail": _csv_error(response) or _not_the_api(response)}
            detail = str(data.get("detail") or response.reason) if isinstance(data, dict) else str(data)
            if response.status_code == 401:
                detail += " Run `qm login` first." if not self.token else " Your token was refused: run `qm login` again."
            if response.status_code == 429 and response.headers.get("Retry-After"):
                detail += f" Retry in {response.headers['Retry-After']} s."
            errors = data.get("errors") if isinstance(data, dict) else None
            raise ApiError(response.status_code, detail, errors if isinstance(errors, dict) else None)
        if raw:
            return response.text
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError as exc:  # a 200 that is no JSON: some other site's page (a catch-all), a login portal
            kind = response.headers.get("Content-Type", "no content type")
            raise CliError(f"{response.status_code} {response.reason} from {response.url} is not the Quartermaster API's "
                           f"JSON ({kind}); check --url (the server's address, such as http://localhost:8000)") from exc


def server_url(text: str) -> str:
    """The server's base URL as given (`--url`, $QM_URL, the config), checked: http or https
    with a host (a port in range), without a trailing slash or the API's own `/api/v1`."""
    base = text.strip().rstrip("/")
    for suffix in ("/api/v1", "/api"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    problem = None
    try:
        parts = urlsplit(base)
    except ValueError as exc:  # `http://[::1`: an IPv6 address not closed
        raise CliError(f"'{text}' is not a server URL: {exc} (see --url or $QM_URL)", exit_code=2) from exc
    if parts.scheme not in ("http", "https") or not parts.netloc:
        problem = "give it as http://host:port or https://host"
    elif parts.query or parts.fragment or "?" in base or "#" in base:
        problem = "a server's address has no ?query or #fragment"
    else:
        try:
            parts.port  # noqa: B018 (raises on a port out of range or not a number)
        except ValueError:
            problem = "its port is not a number from 1 to 65535"
        if " " in parts.netloc:
            problem = "its host name contains a space"
    if problem:
        raise CliError(f"'{text}' is not a server URL: {problem} (see --url or $QM_URL)", exit_code=2)
    return base


def _not_the_api(response: requests.Response) -> str:
    """An error that is not the API's JSON: an HTML page, or a bare status from another server
    (an empty 404 said only "error: Not Found"), where the URL points somewhere else; a 5xx the
    server, or a proxy before it, failing. Called only once the answer is known not to be JSON."""
    html = "html" in response.headers.get("Content-Type", "")
    text = " ".join(response.text.split())
    what = ("an HTML page" if html else f"the text '{text[:100]}{'…' if len(text) > 100 else ''}'" if text
            else "an empty answer")
    if response.status_code >= 500:
        # The server (or a proxy before it) failed: the address is right, "check --url" was not.
        return (f"{response.status_code} {response.reason} from {response.url}: the server failed to answer "
                f"({'an HTML error page' if html else what}); try again, and tell its admins if it goes on")
    return (f"{response.status_code} {response.reason} from {response.url}: {what}, not the Quartermaster API; "
            "check --url (the server's address, such as http://localhost:8000)")


def _csv_error(response: requests.Response) -> str | None:
    """A CSV answer's error: one `error` column with the API's sentence in its one cell."""
    if not response.headers.get("Content-Type", "").startswith("text/csv"):
        return None
    rows = list(csv.reader(io.StringIO(response.text)))
    if len(rows) == 2 and rows[0] == ["error"] and len(rows[1]) == 1:
        return rows[1][0]
    return None


def _first_line(exc: Exception) -> str:
    text = str(exc)
    if "Connection refused" in text:
        return "connection refused (is the server running? check --url or QM_URL)"
    return text.splitlines()[0][:200] if text else type(exc).__name__
