"""`qm login`, `qm logout`, `qm whoami`: the token stored for a server and whom it belongs to;
and what the commands ask the server about you (`--mine`'s user name, whether you see jobs at all)."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Callable
from typing import Any

from controlplane.cli import output
from controlplane.cli.client import (
    Api,
    ApiError,
    CliError,
    UsageError,
    config_path,
    load_config,
    save_config,
    server_url,
)


def cmd_login(api: Api, args: argparse.Namespace) -> int:
    if args.password_stdin and not args.username:
        # Standard input is the password's: the prompt for a user name read the password as the
        # user name and then sent an empty password ("password: This field may not be blank").
        raise UsageError("--password-stdin reads the password from standard input: give the user name with "
                       "--username (qm login --username NAME --password-stdin < pw.txt)")
    username = args.username or _ask("Username: ", input, "give it with --username")
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
        if not password:
            raise UsageError("--password-stdin: standard input gave no password (an empty first line, or none)")
    else:
        password = os.environ.get("QM_PASSWORD") or _ask(
            "Password: ", getpass.getpass, "give it with --password-stdin or $QM_PASSWORD")
    anonymous = Api(api.url, None, api.timeout_s, url_defaulted=api.url_defaulted)
    answer = anonymous.request("POST", "auth/token/", body={"username": username, "password": password})
    replaced = _stored_login()
    path = save_config({"url": api.url, "token": answer["token"], "username": answer["username"]})
    _revoke_replaced(api, replaced, answer["token"])
    me = Api(api.url, answer["token"], api.timeout_s).request("GET", "auth/me/")
    if args.json:
        output.emit_json({"url": api.url, "config": str(path), **me})
        return 0
    roles = ", ".join(f"{m['role']} of {m['team']}" if m["team"] else m["role"] for m in me["memberships"]) or "no team"
    output.note(f"Logged in to {api.url} as {me['username']} ({roles}). Token saved in {path}.")
    return 0


def _stored_login() -> dict[str, Any]:
    """What the config file holds now (nothing if it cannot be read)."""
    try:
        return load_config()
    except CliError:
        return {}


def _revoke_replaced(api: Api, previous: dict[str, Any], new_token: str) -> None:
    """The token of the login this one replaces here is revoked on its server: each login has a
    token of its own, and one forgotten by the config file would stay valid until the user's
    cap, a password change or an admin ended it. Best effort: a server that cannot be asked
    leaves it valid, as `qm logout` says when that happens."""
    token, url = previous.get("token"), previous.get("url")
    if not token or not url or token == new_token:
        return
    try:
        Api(server_url(url), token, api.timeout_s).request("POST", "auth/logout/")
    except CliError:
        pass  # revoked already, another user's, or its server away: nothing more to do here


def _ask(prompt: str, read: Callable[[str], str], instead: str) -> str:
    """Ask for what was not given on the command line. Standard input that has ended (a script,
    CI, `< /dev/null`) was an EOFError traceback: say what to give instead."""
    try:
        return read(prompt)
    except EOFError:
        print(file=sys.stderr)  # end the prompt's line
        what = prompt.rstrip(": ").lower()
        raise UsageError(f"no {what}: standard input ended before one was typed; {instead}") from None


def cmd_logout(api: Api, args: argparse.Namespace) -> int:
    """Revoke the stored token on the server it came from, then forget it here. Each `qm login`
    has its own token, so the user's other clients stay logged in. The local copy goes even when
    the server cannot be asked; only failing to remove it is an error."""
    path = config_path()
    try:
        config, unreadable = load_config(), False
    except CliError:
        config, unreadable = {}, True
    token = config.get("token")
    if token is None and not unreadable:
        env = " ($QM_TOKEN in your environment is left alone.)" if os.environ.get("QM_TOKEN") else ""
        output.note(f"Not logged in: no token stored in {path}.{env}")
        return 0
    server, revoked, note = api.url, False, ""
    if unreadable:
        note = f"{path} could not be read; removing it (a token in it, if any, was not revoked on the server)."
        output.note(f"warning: {note}", out=sys.stderr)
    if token is not None:
        try:
            server = server_url(config.get("url") or api.url)
            Api(server, token, api.timeout_s).request("POST", "auth/logout/")
            revoked = True
            whose = f"{config['username']}'s" if config.get("username") else "your"
            note = f"Token revoked on {server}: this qm is logged out; {whose} other logins keep their own tokens."
        except ApiError as error:
            if error.status == 401:
                note = (f"The token was already invalid on {server} (revoked by an admin or a password change, "
                        "or logged out with a browser session).")
            else:
                note = f"The server refused to revoke the token ({error}); it may still be valid there."
                output.note(f"warning: {note}", out=sys.stderr)
        except CliError as error:
            note = (f"{error}: the token was NOT revoked on the server and stays valid there until your "
                    "password changes or an admin revokes your API tokens.")
            output.note(f"warning: {note}", out=sys.stderr)
    try:
        if unreadable:
            path.unlink()
        else:
            config.pop("token", None)
            save_config(config)
    except OSError as exc:
        raise CliError(f"could not remove the stored token from {path}: {exc}") from exc
    if args.json:
        output.emit_json({"server": server, "revoked": revoked, "config": str(path), "note": note})
        return 0
    if note and (revoked or "already invalid" in note):
        output.note(note)
    output.note(f"Logged out; token removed from {path}.")
    return 0


def cmd_whoami(api: Api, args: argparse.Namespace) -> int:
    me = api.request("GET", "auth/me/")
    if args.json:
        output.emit_json(me)
        return 0
    output.fields([
        ("user", me["username"]), ("server", api.url), ("default team", me["default_team"]),
        ("may submit", "yes" if me["may_submit"] else "no"),
        # A role without a team (finance, admin) reads the whole fleet: said so, not "finance@-".
        ("roles", ", ".join(f"{m['role']}@{m['team']}" if m["team"] else f"{m['role']} (fleet-wide)"
                            for m in me["memberships"])),
    ])
    return 0


def my_username(api: Api) -> str:
    """Whose token this is. The stored name only goes with the stored token: with $QM_TOKEN (or
    another server's token) it named someone else, and `--mine` listed nothing."""
    config = load_config()
    stored = config.get("username") if api.token and config.get("token") == api.token else None
    return str(stored or api.request("GET", "auth/me/")["username"])


def reads_no_jobs(api: Api) -> bool:
    """Finance, not also an admin or a team's member, is shown no job at all: an empty list says
    nothing of the queue."""
    me = api.request("GET", "auth/me/")
    in_a_team = any(m.get("team") for m in me.get("memberships") or [])
    return bool(me.get("is_finance")) and not me.get("is_admin") and not in_a_team
