"""`qm notify`: webhooks for your jobs' events (notification-hooks/): add, list, edit, rotate,
history, rm, test."""

from __future__ import annotations

import argparse
from typing import Any

from controlplane.cli import output
from controlplane.cli.client import Api, ApiError, CliError, UsageError

NOTIFY_EVENTS = ("started", "succeeded", "failed", "timed_out", "cancelled", "preempted", "requeued", "unschedulable",
                 "borrowed")
#: `qm notify add --events` shorthands, as Slurm's --mail-type spells them.
NOTIFY_ALIASES = {"begin": ["started"], "end": ["succeeded", "failed", "timed_out", "cancelled"],
                  "fail": ["failed", "timed_out"], "requeue": ["requeued"], "all": list(NOTIFY_EVENTS)}


def _notify_events(text: str) -> list[str]:
    events: list[str] = []
    for word in (w.strip() for w in text.split(",")):
        if word:
            events.extend(NOTIFY_ALIASES.get(word.lower(), [word]))
    return list(dict.fromkeys(events))


def _hook_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"'{text}' is not a hook id: `qm notify list` shows them") from None


def _hook_refused(error: ApiError, flags: dict[str, str]) -> CliError | ApiError:
    """The API's field errors, each with the flag that gave it."""
    if not error.errors:
        return error
    return CliError("Invalid request." + "".join(
        f"\n  {field} ({flags.get(field.split('.')[0], field)}): {' '.join(msgs)}"
        for field, msgs in error.errors.items()))


def _signature_help(hook: dict[str, Any], verb: str) -> None:
    output.note(f"Its {verb} secret (shown once; receivers check X-Quartermaster-Signature with it): "
                         f"{hook['secret']}")
    output.note("Receivers check: X-Quartermaster-Signature == 'sha256=' + hex HMAC-SHA256 of the raw body with it.")


def _notify_edit(api: Api, args: argparse.Namespace, hook_id: int) -> int:
    """`qm notify edit ID`: PATCH what the flags give; nothing given is refused before asking."""
    body: dict[str, Any] = {}
    flags: dict[str, str] = {}
    if args.new_url is not None:
        body["url"], flags["url"] = args.new_url, f"--hook-url {args.new_url}"
    if args.events is not None:
        body["events"], flags["events"] = _notify_events(args.events), f"--events {args.events}"
    if args.team is not None or args.own_jobs:
        body["team"] = None if args.own_jobs else args.team
        flags["team"] = "--own-jobs" if args.own_jobs else f"--team {args.team}"
    if args.active is not None:
        body["active"], flags["active"] = args.active, "--resume" if args.active else "--pause"
    if not body:
        raise UsageError("Nothing to change: give --hook-url, --events, --team or --own-jobs, --pause or --resume "
                       f"(qm notify edit {hook_id} --help).")
    try:
        hook = api.request("PATCH", f"notification-hooks/{hook_id}/", body=body)
    except ApiError as error:
        raise _hook_refused(error, flags) from None
    if args.json:
        output.emit_json(hook)
        return 0
    whose = f"every job of team {hook['team']}" if hook["team"] else "your own jobs"
    state = "" if hook["active"] else " It is paused: nothing is sent until you resume it."
    output.note(f"Hook {hook['id']} now POSTs {', '.join(hook['events'])} of {whose} to {hook['url']}."
                         + state)
    if "url" in body:
        output.note(f"Deliveries still queued go to the new URL at their next attempt. Try it: qm notify test {hook['id']}")
    return 0


def _hook_url_given(args: argparse.Namespace) -> str:
    """`qm notify add`'s hook URL: positional, or `--hook-url` (as `qm notify edit` takes it).
    None given with `--url`, which names the Quartermaster server (every command's flag), is the
    hook written as `--url`: refused before any request, saying what --url is and the form to use
    (argparse said only "the following arguments are required: URL" under a usage line showing
    `--url URL`)."""
    given = [url for url in (args.hook_url, args.hook_url_flag) if url is not None]
    if len(set(given)) > 1:
        raise CliError(f"two hook URLs given ({given[0]} and --hook-url {given[1]}): give one", exit_code=2)
    if given:
        return given[0]
    if args.url:
        raise CliError(f"no hook URL given: --url {args.url} names the Quartermaster server to talk to, not the "
                       f"hook. Give the hook's URL: qm notify add {args.url} (or --hook-url {args.url})",
                       exit_code=2)
    raise CliError("no hook URL given: qm notify add HOOK_URL (or --hook-url HOOK_URL)", exit_code=2)


def cmd_notify(api: Api, args: argparse.Namespace) -> int:
    """`qm notify add|list|edit|rotate|history|rm|test`: webhooks for your jobs' events (notification-hooks/)."""
    action = args.notify_action
    if action == "add":
        body: dict[str, Any] = {"url": _hook_url_given(args), "events": _notify_events(args.events)}
        if args.team:
            body["team"] = args.team
        if args.secret:
            body["secret"] = args.secret
        try:
            hook = api.request("POST", "notification-hooks/", body=body)
        except ApiError as error:
            raise _hook_refused(error, {"url": "HOOK_URL", "events": f"--events {args.events}",
                                        "team": f"--team {args.team}", "secret": "--secret"}) from None
        if args.json:
            output.emit_json(hook)
            return 0
        whose = f"every job of team {hook['team']}" if hook["team"] else "your own jobs"
        output.note(f"Hook {hook['id']} POSTs {', '.join(hook['events'])} of {whose} to {hook['url']}.")
        output.note(f"Its secret (shown once; receivers check X-Quartermaster-Signature with it): "
                             f"{hook['secret']}")
        output.note(f"Try it: qm notify test {hook['id']}")
        return 0
    if action == "list":
        # Every page: one (1,000 hooks) was printed as the whole list, the latest hooks missing.
        page = api.listed("notification-hooks/", {})
        if args.json:
            output.emit_json(page)
            return 0
        rows = page["results"]
        if not rows:
            output.note("No notification hooks. Add one: qm notify add URL --events started,failed")
            return 0
        output.table([(h["id"], h["url"], ",".join(h["events"]), h["team"] or "(own jobs)",
                       "yes" if h["active"] else "paused",
                       h["status"] if h.get("deliverable", True) else "NOT DELIVERING: see below") for h in rows],
                     ["ID", "URL", "EVENTS", "TEAM", "ACTIVE", "STATUS"], cut=["URL", "EVENTS"])
        for h in rows:  # each POST of such a hook is refused here: say why and what to do
            if not h.get("deliverable", True):
                fix = ("https://... (the receiver's https address)" if h["url"].startswith("http://")
                       else "URL (one the rule above allows)")
                print()
                output.note(f"Hook {h['id']} is not delivering: every POST to {h['url']} is refused here: "
                                     f"{h['undeliverable_reason']}")
                output.note(f"  Fix it: qm notify edit {h['id']} --hook-url {fix}")
        return 0
    hook_id = _hook_id(args.hook)
    if action == "edit":
        return _notify_edit(api, args, hook_id)
    if action == "rotate":
        hook = api.request("POST", f"notification-hooks/{hook_id}/rotate-secret/")
        if args.json:
            output.emit_json(hook)
            return 0
        output.note(f"Hook {hook['id']} has a new signing secret: the old one is refused from now on, retries of older "
              "deliveries included.")
        _signature_help(hook, "new")
        return 0
    if action == "history":
        changes = api.request("GET", f"notification-hooks/{hook_id}/history/")
        if args.json:
            output.emit_json(changes)
            return 0
        if not changes:
            output.note(f"Hook {hook_id} has no recorded changes (it was made before changes were recorded).")
            return 0
        # CHANGE is a sentence (a URL and an event list changed: 300 columns and more): wrapped
        # under its column on a terminal, as an event's WHAT is.
        output.table([(output.utc_text(c["at"], suffix=""), c["actor"].removeprefix("user:"), c["message"])
                      for c in changes], ["AT (UTC)", "BY", "CHANGE"], wrap=["CHANGE"], least={"CHANGE": 30})
        return 0
    if action == "rm":
        api.request("DELETE", f"notification-hooks/{hook_id}/")
        if args.json:
            output.emit_json({"deleted": hook_id})
        else:
            output.note(f"Hook {hook_id} removed, with the deliveries it still had to send.")
        return 0
    answer = api.request("POST", f"notification-hooks/{hook_id}/test/")
    output.say_answer(answer, args.json)
    return 0 if answer["delivered"] else 1
