"""`qm`: submit and watch jobs, explain waits, cancel, read showback, act on nodes.

    qm login [--url URL] [--username NAME] [--password-stdin]
    qm submit [FILE.yaml] [--gpus 16 --gpus-per-node 8 --gpu-type H100-80GB --time 4h
              --priority research --array 0-99 ...] [-- COMMAND ...]
    qm list | qm status [JOB] | qm explain JOB | qm events JOB [--follow] | qm cancel JOB...
    qm runs JOB                                                  # its runs (sacct --duplicates)
    qm hold JOB... | qm release JOB... [--array ID] | qm update JOB --gpus 8 --time 2h --priority high -d afterok:12|none
    qm update ARRAY_ID --array-limit 4|none                      # a job array's task limit (Slurm's %4)
    qm history [--since yesterday] [--until today] [--state failed] [--format csv]   (alias: qm sacct)
    qm requeue JOB... [--hold] [--reason TEXT] [--array ID [--states failed,timed_out]]  # back to the queue
    qm logs JOB [--rank N | --all-ranks] [--tail N] [--generation G] [-f]
    qm showback --by team --window 7d | --month 2026-11 [--csv]
    qm quotas [--team T]
    qm nodes [--all] | qm nodes cordon|drain|uncordon|retire|return NODE | qm cordon|drain|uncordon NODE
    qm notify add URL --events started,failed [--team T] | qm notify list | qm notify rm ID | qm notify test ID
    qm notify edit ID [--hook-url URL] [--events E] [--team T | --own-jobs] [--pause | --resume] | qm notify rotate ID
    qm notify history ID
    qm maint add --nodes N1,N2 | --pool P --start +2h|ISO --duration 4h|--end ISO --reason "firmware upgrade"
    qm maint list [--all] [--node N] | qm maint show ID | qm maint edit ID [--start ...] | qm maint cancel ID

Human tables by default, `--json` for scripts. Errors print the API's message and exit 1 (2 when
the server cannot be reached); never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import os
import re
import shlex
import signal
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import yaml

from controlplane.cli import output
from controlplane.cli.client import (
    DEFAULT_URL,
    Api,
    ApiError,
    CliError,
    config_path,
    load_config,
    save_config,
    server_url,
)
from controlplane.services import dependency_text, quota_text
from scheduler_core.sentences import counted, gang_roles

ACTIVE_STATES = ["pending", "running", "preempting"]
# YAML keys and flags that are spelled differently from the API's fields.
YAML_ALIASES = {"time": "runtime_limit_s", "priority": "priority_class", "checkpoint_every": "checkpoint_interval_s"}


# ------------------------------------------------------------------------------------ login


def cmd_login(api: Api, args: argparse.Namespace) -> int:
    username = args.username or input("Username: ")
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = os.environ.get("QM_PASSWORD") or getpass.getpass("Password: ")
    anonymous = Api(api.url, None)
    answer = anonymous.request("POST", "auth/token/", body={"username": username, "password": password})
    path = save_config({"url": api.url, "token": answer["token"], "username": answer["username"]})
    me = Api(api.url, answer["token"]).request("GET", "auth/me/")
    if args.json:
        output.emit_json({"url": api.url, "config": str(path), **me})
        return 0
    roles = ", ".join(f"{m['role']} of {m['team']}" if m["team"] else m["role"] for m in me["memberships"]) or "no team"
    print(f"Logged in to {api.url} as {me['username']} ({roles}). Token saved in {path}.")
    return 0


def cmd_logout(api: Api, args: argparse.Namespace) -> int:
    """Revoke the stored token on the server it came from, then forget it here. A user has one
    token, so every `qm` logged in as them is logged out too. The local copy goes even when the
    server cannot be asked; only failing to remove it is an error."""
    path = config_path()
    try:
        config, unreadable = load_config(), False
    except CliError:
        config, unreadable = {}, True
    token = config.get("token")
    if token is None and not unreadable:
        env = " ($QM_TOKEN in your environment is left alone.)" if os.environ.get("QM_TOKEN") else ""
        print(f"Not logged in: no token stored in {path}.{env}")
        return 0
    server, revoked, note = api.url, False, ""
    if unreadable:
        note = f"{path} could not be read; removing it (a token in it, if any, was not revoked on the server)."
        print(f"warning: {note}", file=sys.stderr)
    if token is not None:
        try:
            server = server_url(config.get("url") or api.url)
            Api(server, token).request("POST", "auth/logout/")
            revoked = True
            note = (f"Token revoked on {server}: every qm logged in as {config.get('username') or 'you'} "
                    "is logged out (one token per user).")
        except ApiError as error:
            if error.status == 401:
                note = f"The token was already invalid on {server} (revoked by another logout or an admin)."
            else:
                note = f"The server refused to revoke the token ({error}); it may still be valid there."
                print(f"warning: {note}", file=sys.stderr)
        except CliError as error:
            note = (f"{error}: the token was NOT revoked on the server and stays valid there until you "
                    "`qm login` and `qm logout` again with the server reachable, or an admin deletes it.")
            print(f"warning: {note}", file=sys.stderr)
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
        print(note)
    print(f"Logged out; token removed from {path}.")
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


# ----------------------------------------------------------------------------------- submit


def _load_spec_file(path: str) -> dict[str, Any]:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise CliError(f"{path} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from exc
    try:
        data = _plain(yaml.safe_load(text))
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise CliError(f"{path} must be a mapping of job fields (name, gpus, ...), got {type(data).__name__}")
    spec: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        field = YAML_ALIASES.get(name, name)
        if name == "time" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # `time: 30` as `--time 30`: minutes (`runtime_limit_s: 30` is seconds)
        if field in ("runtime_limit_s", "checkpoint_interval_s") and isinstance(value, str):
            value = _duration(value, str(key), TIME_BARE_UNIT if name == "time" else 1)
        if field == "command" and isinstance(value, list):
            value = shell_command([str(v) for v in value])
        if field == "array" and isinstance(value, int):
            value = str(value)
        if field == "env" and isinstance(value, dict):
            _env_values_are_text(path, value)
        if field == "roles" and isinstance(value, list):  # `gpus-per-member:` as the top level's keys
            value = [{str(k).replace("-", "_"): v for k, v in role.items()} if isinstance(role, dict) else role
                     for role in value]
        spec[field] = value
    return spec


def _env_values_are_text(path: str, env: dict[Any, Any]) -> None:
    """YAML reads `DEBUG: yes` as true and `VERSION: 1.10` as 1.1: refuse them with the fix
    (quote the value) rather than the API's bare "Not a valid string", or pass a changed value."""
    unquoted = [(name, value) for name, value in env.items() if isinstance(value, bool | int | float)]
    if not unquoted:
        return
    said = "; ".join(
        f"env.{name}: YAML read it as the {'boolean' if isinstance(value, bool) else 'number'} "
        f"{str(value).lower() if isinstance(value, bool) else value}" for name, value in unquoted[:5])
    raise CliError(f"{path}: {said}. Environment values are text: quote them in the file "
                   f"({unquoted[0][0]}: \"...\") to pass exactly what you wrote.")


def _plain(value: Any) -> Any:
    """YAML's values as JSON's: a date or time YAML read from `name: 2026-11-29` is the text it
    was written as (it ended in a traceback: "Object of type date is not JSON serializable"),
    a set a list, bytes refused by the API as any other wrong type would be."""
    if isinstance(value, dict):
        return {str(k) if isinstance(k, date | datetime) else k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, date | datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return repr(value)
    return value


def shell_command(words: list[str]) -> str:
    """The command line the node agent gives `/bin/sh -c`. Several words are an argv, kept as
    they are (quoted where the shell would split or expand them, as `srun` passes its arguments:
    `-- python train.py --run "lr sweep"` ran `--run lr sweep`, two words); a single word is a
    shell command line as written (`-- 'python a.py && python b.py'`, `-- 'train.py > log'`)."""
    return words[0] if len(words) == 1 else shlex.join(words)


#: sbatch reads `--time 30` as 30 minutes, and so does qm's `--time` (it read 30 seconds, and a
#: Slurm user's job was killed at half a minute); other durations' bare numbers are seconds.
TIME_BARE_UNIT = 60


def _duration(text: str, flag: str, bare: int = 1) -> int:
    try:
        return output.parse_duration(text, bare)
    except ValueError as exc:
        raise CliError(f"{flag}: {exc}") from exc


#: How a job's status says each dependency type: "job 12 succeeds".
DEPENDENCY_TYPES = {"after": "starts", "afterok": "succeeds", "afternotok": "fails", "afterany": "ends"}


def parse_dependency(text: str) -> list[dict[str, Any]]:
    """Slurm's `--dependency` list as the API's `dependencies`: `afterok:12:13,afterany:14` →
    [{job 12, afterok}, {job 13, afterok}, {job 14, afterany}]; `singleton` → {"condition":
    "singleton"}; `none`: [] (`qm update -d none` removes them all). A job array's id (a UUID,
    as `qm submit --array` printed) stands for every task of the array. The one parser the API
    and the jobs page use too (services/dependency_text.py); raises CliError naming the option
    and the part at fault."""
    try:
        return dependency_text.parse(text)
    except dependency_text.BadDependencyText as exc:
        raise CliError(f"--dependency {text}: {exc}") from None


def update_dependency(text: str) -> list[dict[str, Any]] | str:
    """`qm update -d`: the whole new list (`parse_dependency`), or an edit of the list it has,
    `+=afterok:5` / `-=afterany:7` (scontrol update dependency+= / dependency-=; `+afterok:5`
    and `-afterany:7` too), checked here and sent as the API's text, `+afterok:5`, which the
    server applies to the list as it is then."""
    try:
        edit = dependency_text.parse_edit(text)
    except dependency_text.BadDependencyText as exc:
        raise CliError(f"--dependency {text}: {exc}") from None
    if edit is None:
        return parse_dependency(text)
    rest = "".join(text.split())[1:].lstrip("=")
    return f"{edit.op}{rest}"


def _spec_from_args(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    spec = _load_spec_file(args.file) if args.file else {}
    flags = {
        "name": args.name, "gpus": args.gpus, "gpus_per_node": args.gpus_per_node,
        "min_gpu_memory_gb": args.min_gpu_memory, "cpus_per_gpu": args.cpus_per_gpu,
        "memory_gb_per_gpu": args.memory_per_gpu, "topology": args.topology, "min_gpus": args.min_gpus,
        "max_gpus": args.max_gpus, "priority_class": args.priority, "project": args.project, "team": args.team,
        "workload": args.workload, "array": args.array,
    }
    spec.update({k: v for k, v in flags.items() if v is not None})
    if args.gpu_type:
        spec.pop("gpu_type", None)
        spec["gpu_types"] = args.gpu_type
    if args.time:
        spec["runtime_limit_s"] = _duration(args.time, "--time", TIME_BARE_UNIT)
    if args.hold:
        spec["hold"] = True  # sbatch -H: submitted held, out of the queue until `qm release`
    if args.hold_reason is not None:
        if not spec.get("hold"):  # the API's refusal says `send "hold": true`, its own words
            raise CliError(f"Invalid request.\n  hold_reason (--hold-reason {args.hold_reason}): a reason is for a job "
                           "submitted held: add --hold (sbatch -H), or leave the reason out")
        spec["hold_reason"] = args.hold_reason
    if args.checkpoint_every:
        spec["checkpoint_interval_s"] = _duration(args.checkpoint_every, "--checkpoint-every")
    if args.env:
        if not isinstance(spec.get("env") or {}, dict):
            raise CliError("env in the YAML file must be a mapping of NAME: value, to add --env to it")
        env = dict(spec.get("env") or {})
        for item in args.env:
            key, sep, value = item.partition("=")
            if not sep:
                raise CliError(f"--env {item}: expected NAME=VALUE")
            env[key] = value
        spec["env"] = env
    if args.dependency:
        spec["dependencies"] = parse_dependency(args.dependency)
        if isinstance(spec["dependencies"], dependency_text.AnyOf):
            spec["dependency_mode"] = "any"  # afterok:12?afterok:13: any one of them
    if command:
        spec["command"] = shell_command(command)
    if "name" not in spec and spec.get("command"):
        # The program's name: the first word as the shell reads it (`'my prog.py' --x` is 'my prog.py').
        try:
            words = shlex.split(str(spec["command"]))
        except ValueError:  # an unfinished quote: the node's shell will refuse it, the name need not
            words = str(spec["command"]).split()
        if words:
            spec["name"] = Path(words[0]).name or words[0]
    if "name" not in spec:
        raise CliError("a job needs a name: give --name, a `name:` in the YAML file, or a command after --")
    if "gpus" not in spec and _roles_gpus(spec.get("roles")) is not None:
        spec["gpus"] = _roles_gpus(spec["roles"])  # a heterogeneous gang: its roles' sum
    if "gpus" not in spec and not spec.get("roles"):
        raise CliError("a job needs --gpus (or `gpus:` in the YAML file)")
    # Roles qm cannot add up (a member's `gpus:` for `gpus_per_member:`, a count left out) go to
    # the API, which names each role's field at fault; "a job needs --gpus" sent the user to the
    # one field qm would have filled in.
    return spec


def _roles_gpus(roles: Any) -> int | None:
    """The GPUs a gang's `roles:` add up to (count × gpus_per_member each), or None when they
    are not plainly numbers: the API then names what is wrong with them."""
    if not isinstance(roles, list) or not roles:
        return None
    total = 0
    for role in roles:
        count = role.get("count") if isinstance(role, dict) else None
        each = role.get("gpus_per_member") if isinstance(role, dict) else None
        if type(count) is not int or type(each) is not int:
            return None
        total += count * each
    return total


#: Flags spelled otherwise than the API field they set: a refusal names the flag as typed too.
FLAG_OF_FIELD = {"runtime_limit_s": "time", "priority_class": "priority", "checkpoint_interval_s": "checkpoint_every",
                 "min_gpu_memory_gb": "min_gpu_memory", "memory_gb_per_gpu": "memory_per_gpu", "gpu_types": "gpu_type",
                 "dependencies": "dependency", "array_task_limit": "array_limit",
                 "ordering": "sort", "pending_code": "reason"}  # qm list's


def _refusal(error: ApiError, args: argparse.Namespace | None = None) -> str:
    """The API's refusal: its sentence, or, when it names fields, each field at fault on a line
    of its own (the sentence says the same, so printing both said every problem twice). A field
    set by a flag of another spelling names the flag and its value (`runtime_limit_s (--time 8d)`)."""
    if not error.errors:
        return str(error)

    def name(field: str) -> str:
        # An item's field (`dependencies.1.condition`) was typed as its list's flag.
        flag = FLAG_OF_FIELD.get(field) or FLAG_OF_FIELD.get(field.split(".")[0])
        given = getattr(args, flag, None) if args is not None and flag else None
        if not given:
            return field
        words = given if isinstance(given, list) else [given]
        return f"{field} (" + " ".join(f"--{flag.replace('_', '-')} {word}" for word in words) + ")"

    return "Invalid request." + "".join(f"\n  {name(field)}: {' '.join(msgs)}" for field, msgs in error.errors.items())


def array_span(ids: list[int]) -> str:
    """`jobs 413–512`, only when they are: the tasks of one array need not have consecutive ids
    (concurrent submits take ids from the same sequence meanwhile)."""
    low, high = min(ids), max(ids)
    if high - low + 1 == len(ids):
        return f"jobs {low}–{high}"
    return f"jobs {low} to {high}, not all consecutive"


def cmd_submit(api: Api, args: argparse.Namespace, command: list[str]) -> int:
    if args.parsable and args.json:
        raise CliError("give --json (the API's answer) or --parsable (the id alone), not both")
    spec = _spec_from_args(args, command)
    key = args.idempotency_key or f"qm-{uuid.uuid4()}"
    is_array = "array" in spec
    answer: dict[str, str] = {}
    try:
        result = api.request("POST", "job-arrays/" if is_array else "jobs/", body=spec,
                             headers={"Idempotency-Key": key}, retry=True, response_headers=answer)
    except ApiError as error:
        if "gpus" not in spec and any(field.startswith("roles") for field in error.errors):
            # qm adds up the roles' GPUs itself: the API's "gpus: required" is the roles' fault.
            error.errors.pop("gpus", None)
        raise CliError(_refusal(error, args)) from error
    # The server answered with what an earlier submit under this key created. With our own fresh
    # key that can only be our retry of a request whose answer was lost: this run created it.
    replayed = bool(args.idempotency_key) and answer.get("idempotent-replayed") == "true"
    if args.json:
        output.emit_json(result)
    elif args.parsable:  # sbatch --parsable: the id alone, for JOB=$(qm submit --parsable ...)
        print(result["array_id"] if is_array else result["id"])
    elif is_array:
        what = (f"array {result['array_id']}: {result['count']} tasks of {counted(spec['gpus'], 'GPU')}, "
                f"{array_span(result['job_ids'])} (team {result['team']})" + _array_limit_words(result))
        if replayed:
            print(output.visible(f"Idempotency key {key} was already used: no new tasks were submitted. "
                                 f"It returned {what}, now {_array_states(result)}."))
        else:
            print(f"Submitted {what}.")
    else:
        what = (f"job {result['id']} ({result['name']}): {counted(result['gpus'], 'GPU')}, "
                f"priority {result['priority_class']}, team {result['team']}, "
                f"limit {output.human_duration(result['runtime_limit_s'])}, {result['state']}"
                + (f" and held: `qm release {result['id']}` to queue it" if result.get("hold") else "")
                + (f", runs after {runs_after(result)}" if result.get("dependencies") or result.get("singleton") else ""))
        if replayed:
            print(output.visible(f"Idempotency key {key} was already used: no new job was submitted. "
                                 f"It returned {what}."))
        else:
            print(output.visible(f"Submitted {what}."))
    return 0


def _array_limit_words(record: dict[str, Any]) -> str:
    """`, at most 10 at a time` for an array (or a task) with a task limit (Slurm's `%10`); ""."""
    limit = record.get("array_task_limit")
    return f", at most {limit} at a time" if limit else ""


def _array_states(summary: dict[str, Any]) -> str:
    """`3 running, 1 stopping: cancelled`: an array's tasks by state_label (a stopping task by
    why it stops), as a replay reads them now; by state from a server that does not say labels."""
    states = summary.get("state_labels") or summary.get("states") or {}
    return ", ".join(f"{n} {state}" for state, n in sorted(states.items(), key=lambda kv: (-kv[1], kv[0]))) or "no tasks"


# ------------------------------------------------------------------------------ list, status


def _list_params(args: argparse.Namespace, api: Api) -> dict[str, Any]:
    params: dict[str, Any] = {"limit": args.limit}
    if args.offset:
        params["offset"] = args.offset
    if args.state:
        params["state"] = args.state
    elif not args.all:
        params["state"] = ACTIVE_STATES
    if args.team:
        params["team"] = args.team
    if args.node:
        params["node"] = args.node
    if args.sort:
        params["ordering"] = args.sort.replace(" ", "")
    if args.array:
        try:
            params["array_id"] = str(uuid.UUID(args.array.strip()))
        except ValueError:
            raise CliError(f"'{args.array}' is not an array id (a UUID, as `qm submit --array` printed)") from None
    if args.mine and args.user:
        raise CliError("give --mine or --user USER, not both")
    for flag, param in (("user", "user"), ("name", "name"), ("project", "project"), ("priority", "priority_class"),
                        ("reason", "pending_code")):
        value = getattr(args, flag)
        if value is not None and not value.strip():
            raise CliError(f"--{flag} is empty: give a {'reason code' if flag == 'reason' else flag}")
        if value is not None:
            params[param] = value.strip()
    if args.mine:
        params["user"] = _my_username(api)
    return params


def _my_username(api: Api) -> str:
    """Whose token this is. The stored name only goes with the stored token: with $QM_TOKEN (or
    another server's token) it named someone else, and `--mine` listed nothing."""
    config = load_config()
    stored = config.get("username") if api.token and config.get("token") == api.token else None
    return str(stored or api.request("GET", "auth/me/")["username"])


def _elastic(job: dict[str, Any]) -> str:
    """`elastic 4–16` for an elastic job, else empty."""
    if not (job.get("min_gpus") or job.get("max_gpus")):
        return ""
    return f"elastic {job['min_gpus'] or job['gpus']}–{job['max_gpus'] or job['gpus']}"


def _state(job: dict[str, Any]) -> str:
    """The job's state as the API labels it: a stopping job (state `preempting` whatever stops it)
    says why, `stopping: cancelled`, `stopping: runtime limit` or `preempting` (the job list and
    timeline say the same). A server without `state_label` gives the state."""
    label = str(job.get("state_label") or job["state"])
    # A held job waits out of the queue: `pending (held)`, `pending (held by admin)`.
    if job["state"] == "pending" and job.get("hold"):
        return f"{label} (held{' by admin' if job['hold'] == 'admin' else ''})"
    return label


def _gpus_cell(job: dict[str, Any]) -> str | int:
    """The list's GPUS cell: the GPUs asked, or `held/asked` for an elastic job holding GPUs (it
    may have grown or shrunk) and for any job holding other than it asked."""
    held = job.get("gpus_held") or 0
    if held and (_elastic(job) or held != job["gpus"]):
        return f"{held}/{job['gpus']}"
    return job["gpus"]


def _gpus_line(job: dict[str, Any]) -> str:
    """`16 held (asked 8, elastic 4–16)`; `none held (asked 8)` for a job holding no GPUs."""
    held = job.get("gpus_held") or 0
    asked = ", ".join(part for part in (f"asked {job['gpus']}", _elastic(job)) if part)
    return f"{held or 'none'} held ({asked})"


def _start_cell(job: dict[str, Any]) -> str:
    """When a waiting job is expected to start (its ETA, as `squeue --start` says): `in 2h`,
    `passed` once the time is past (no cycle has run since), `-` without one."""
    eta = output.parse_time(job.get("eta")) if job["state"] == "pending" else None
    if eta is None:
        return "-"
    ahead = (eta - datetime.now(timezone.utc)).total_seconds()
    return f"in {output.human_duration(ahead)}" if ahead > 0 else "passed"


def cmd_list(api: Api, args: argparse.Namespace) -> int:
    try:
        page = api.request("GET", "jobs/", params=_list_params(args, api))
    except ApiError as error:
        if error.status != 400:
            raise
        raise CliError(_refusal(error, args)) from error  # `ordering (--sort age): …`
    if args.json:
        output.emit_json(page)
        return 0
    rows = [
        (j["id"], j["name"], j["team"], _state(j), _gpus_cell(j), j["priority_class"], output.age(j["submitted_at"]),
         j["queue_position"], _start_cell(j), j["pending_code"] if j["state"] == "pending" else "")
        for j in page["results"]
    ]
    if not rows:
        if page["count"] == 0 and not args.offset and _reads_no_jobs(api):
            print("Finance accounts see no jobs: jobs belong to teams. `qm showback` shows what they cost.")
            return 0
        print("No jobs" + ("" if args.all or args.state else " pending or running (use --all for finished ones)") + ".")
        return 0
    output.table(rows, ["ID", "NAME", "TEAM", "STATE", "GPUS", "PRIORITY", "AGE", "POS", "START", "REASON"])
    limited = {j["array_id"]: j["array_task_limit"] for j in page["results"] if j.get("array_task_limit")}
    for array_id, limit in limited.items():  # JobArrayTaskLimit in REASON: this is why
        print(f"Array {array_id} runs at most {counted(limit, 'task')} at a time.")
    if any("/" in str(row[4]) for row in rows):
        print("GPUS of an elastic job holding GPUs: held/asked (e.g. 16/8: asked 8, grown to 16).")
    if any(row[8] == "passed" for row in rows):
        print("START passed: the expected start has passed and no scheduling cycle has run since.")
    shown_to = args.offset + len(rows)
    if page["count"] > shown_to or args.offset:
        # The API gives at most 1,000 a page: past that, --limit alone cannot show the rest.
        more = f"; --offset {shown_to} for the next" if page["count"] > shown_to else ""
        print(f"({args.offset + 1}–{shown_to} of {page['count']}{more})")
    return 0


def _reads_no_jobs(api: Api) -> bool:
    """Finance, not also an admin or a team's member, is shown no job at all: an empty list says
    nothing of the queue."""
    me = api.request("GET", "auth/me/")
    in_a_team = any(m.get("team") for m in me.get("memberships") or [])
    return bool(me.get("is_finance")) and not me.get("is_admin") and not in_a_team


def cmd_status(api: Api, args: argparse.Namespace) -> int:
    if not args.job:
        return cmd_list(api, args)
    job = api.request("GET", f"jobs/{_job_id(args.job)}/")
    if args.json:
        output.emit_json(job)
        return 0
    shape = counted(job["gpus"], "GPU") + (f", {job['gpus_per_node']} per node" if job["gpus_per_node"] else "")
    if _elastic(job):
        shape += f", {_elastic(job)}"
    # A stopping job (state `preempting` whatever stopped it: a preemption, a resize, a cancel, its
    # runtime limit) says why and by when, as `qm explain` does: the state alone read as a
    # preemption for a job its owner had just cancelled.
    stopping = api.request("GET", f"jobs/{job['id']}/explain/")["reason"] if job["state"] == "preempting" else ""
    # A running job: since when, on which GPUs of which nodes (the API's explanation).
    running = api.request("GET", f"jobs/{job['id']}/explain/")["reason"] if job["state"] == "running" else ""
    preempted, requeued, stopped_for = _last_preemption(api, job) if not stopping else ("", "", "")
    # A requeue someone asked for (qm requeue) is no preemption: its notice says who asked and why;
    # nor is a resize.
    asked = stopped_for in ("Requeued", "RequeuedHeld")
    signal_label = "requeue asked" if asked else "last resized" if stopped_for == "Resized" else "last preempted"
    preemptions = str(job["preemption_count"])
    other = job.get("requeue_count", job["preemption_count"]) - job["preemption_count"]
    if other > 0:  # resized, fenced or asked for: requeued whole, but not against the preemption budget
        preemptions += (f"; requeued {other} more time{'s' if other != 1 else ''} to resize, off a lost node or "
                        "on request")
    if job["preemption_count"] or other > 0:
        preemptions += f", {(job.get('lost_gpu_seconds') or 0) / 3600:.2f} GPU-hours of work lost"
    output.fields([
        ("job", f"{job['id']} {job['name']}"), ("state", _state(job)), ("team", job["team"]),
        ("project", job["project"]), ("submitter", job["submitter"]), ("priority", job["priority_class"]),
        ("gpus", _gpus_line(job)), ("shape", shape),
        *([("roles", gang_roles(job["roles"]))] if job.get("roles") else []),
        ("gpu types", (", ".join(job["gpu_types"]) or "any")
         + (f", at least {job['min_gpu_memory_gb']} GB each" if job.get("min_gpu_memory_gb") else "")),
        ("per gpu", _per_gpu(job)), ("topology", job["topology"]), ("workload", job.get("workload")),
        ("checkpoints", f"every {output.human_duration(job['checkpoint_interval_s'])}"
         if job.get("checkpoint_interval_s") else ""),
        ("runtime limit", output.human_duration(job["runtime_limit_s"])), ("submitted", output.utc_text(job["submitted_at"])),
        ("started", output.utc_text(job["started_at"])), ("finished", output.utc_text(job["finished_at"])),
        ("exit code", job["exit_code"]),
        ("elapsed", output.clock(job["elapsed_s"]) if job.get("elapsed_s") is not None else ""),
        ("gpu-hours", f"{job['gpu_hours']:.2f} held over all its runs (the accounting's)"
         if job.get("gpu_hours") else ""),
        ("waiting because", f"{job['pending_code']}: {job['pending_message']}" if job["state"] == "pending" else ""),
        *([("hold reason", job["hold_reason"])] if job.get("hold") and job.get("hold_reason") else []),
        ("queue position", _position_text(job["queue_position"], job.get("pending_code"), job.get("hold"),
                                          job.get("pending_resolvable", True))),
        ("earliest start", _eta_text(job["eta"], relative=False)),
        *([("eta told", told)] if (told := _eta_told_text(job)) else []),
        *([("running", running)] if running else []),
        # a running elastic job below its maximum that the last cycle did not grow: why not
        *([("not growing", f"{job['growth_code']}: {job['growth_note']}")]
          if job["state"] == "running" and job.get("growth_code") else []),
        ("stopping", stopping),
        ("array", f"{job['array_id']}[{job['array_index']}]"
         + (f", the array runs at most {counted(job['array_task_limit'], 'task')} at a time"
            if job.get("array_task_limit") else "") if job["array_id"] else ""),
        *([("runs after", runs_after(job))] if job.get("dependencies") or job.get("singleton") else []),
        *([("waited on by", ", ".join(f"job {pk}" for pk in job["dependents"]))] if job.get("dependents") else []),
        ("preemptions", preemptions),
        *([(signal_label, preempted)] if preempted else []),
        *([("requeued", requeued)] if requeued else []),
        ("command", job["command"]),
    ])
    return 0


#: The events of a preemption: its notice, then how the stop ended (the job page's "Preempted").
#: A resize's or a requeue asked for is noticed `job.stopping` (`job.preempting` before the
#: control plane's migration 0032: both are read, by their reason).
_SIGNAL_KINDS = ("job.preempting", "job.stopping")
_REQUEUE_KINDS = ("job.preempted", "job.requeued", "job.resized")
#: The reasons of the notices that put the job back in the queue (the API's codes:
#: services/stopping.REQUEUEING_STOPS); a gang member's exit is noticed so too, and ends it.
_REQUEUEING_STOPS = ("Preempted", "Resized", "Requeued", "RequeuedHeld")


def runs_after(job: dict[str, Any]) -> str:
    """`job 12 succeeds (running), job 13 ends (met)`: the job's dependencies and where each
    stands; any-of ones (Slurm's `?`) `any of: job 12 succeeds (running) or job 13 fails
    (pending)`; empty for none."""
    parts = []
    for dep in job.get("dependencies") or []:
        where = "met" if dep.get("satisfied_at") else dep.get("state") or "?"
        parts.append(f"job {dep['job']} {DEPENDENCY_TYPES.get(dep['condition'], dep['condition'])} ({where})")
    if job.get("dependency_mode") == "any" and len(parts) > 1:
        return "any of: " + " or ".join(parts)
    if job.get("singleton"):
        parts.append(f"singleton (one job named {job.get('name', '')!r} of its submitter at a time)")
    return ", ".join(parts)


def _last_preemption(api: Api, job: dict[str, Any]) -> tuple[str, str, str]:
    """The notice of the job's last preemption (when, why, for whom, the grace it had), what
    became of it (requeued, the work lost), in the events' words, and the notice's reason (a
    resize's or a requeue asked for is no preemption): ("", "", "") for a job never preempted.
    One request, newest first."""
    if not job.get("requeue_count", job["preemption_count"]):
        return "", "", ""
    page = api.request("GET", "events/", params={"job": job["id"], "kind": [*_SIGNAL_KINDS, *_REQUEUE_KINDS],
                                                  "limit": 3})
    signal = requeue = None
    for event in page["results"]:  # newest first: the requeue, then the notice it followed
        if event["kind"] in _REQUEUE_KINDS and signal is None and requeue is None:
            requeue = event
        elif event["kind"] in _SIGNAL_KINDS and signal is None and event.get("reason") in _REQUEUEING_STOPS:
            signal = event  # (a gang member's exit, the run's end, is no preemption)
    return _said(signal), _said(requeue), str(signal.get("reason") or "") if signal else ""


def _said(event: dict[str, Any] | None) -> str:
    """`2026-11-30 01:46:10 UTC: <its message>`, or "" for no event."""
    return f"{output.utc_text(event['created_at'])}: {event['message']}" if event else ""


def _per_gpu(job: dict[str, Any]) -> str:
    """`8 CPUs, 64 GB memory`: the host resources asked per GPU; "" when none."""
    parts = []
    if job.get("cpus_per_gpu"):
        parts.append(f"{job['cpus_per_gpu']} CPU{'s' if job['cpus_per_gpu'] != 1 else ''}")
    if job.get("memory_gb_per_gpu"):
        parts.append(f"{job['memory_gb_per_gpu']} GB memory")
    return ", ".join(parts)


def _job_id(text: str) -> int:
    if not (text.isascii() and text.isdigit()):  # int() refuses '²', which isdigit() accepts
        raise CliError(f"'{text}' is not a job id (a number, as `qm list` shows)")
    return int(text)


def _eta_text(value: str | None, *, relative: bool) -> str:
    """An ETA as the job's page says it: "<time> (in 2h)"; once passed, "was <time>, passed
    3m ago: no scheduling cycle has run since" (each cycle writes every waiting job's ETA anew,
    never before the cycle), not "(in 0s)" as if it were starting."""
    eta = output.parse_time(value)
    if eta is None:
        return output.utc_text(value)
    ahead = (eta - datetime.now(timezone.utc)).total_seconds()
    if ahead > 0:
        return f"{output.utc_text(value)} (in {output.human_duration(ahead)})" if relative else output.utc_text(value)
    return f"was {output.utc_text(value)}, passed {output.human_duration(-ahead)} ago: no scheduling cycle has run since"


def _eta_told_text(job: dict[str, Any]) -> str:
    """A started job's first ETA told and how far from it it started, as its page says it."""
    told, started = output.parse_time(job.get("eta_told")), output.parse_time(job.get("started_at"))
    if told is None or started is None:
        return ""
    gap = (started - told).total_seconds()
    how = f"started {output.human_duration(abs(gap))} {'after' if gap > 1 else 'before'} it"
    return f"{output.utc_text(job['eta_told'])} (told {output.utc_text(job.get('eta_told_at'))}), {how}"


def _order_text(api: Api, job_id: int) -> str:
    """A job in line: its priority, its team's share and its place in the next cycle's order,
    as `qm sprio` says them; "" for a job not in line."""
    body = api.request("GET", "jobs/priority/", params={"job": str(job_id)})
    if not body["jobs"]:
        return ""
    r = body["jobs"][0]
    aged = f" + {r['aging_points']:g} for waiting" if r["aging_points"] else ""
    return (f"{r['effective_priority']:g} (class {r['priority_class']} {r['class_value']:g}{aged}); team "
            f"{r['team']}'s share {r['team_share']:.3f}; {r['order']} of {body['in_line']} in line for the next "
            "cycle (qm sprio)")


def _eta_record_text(e: dict[str, Any]) -> str:
    """How far the ETAs told held lately, beside a waiting job's ETA, the fleet's and its size
    class's, as explain's `eta_record` gives them (the record its page says, of the same minute)."""
    r = e.get("eta_record")
    if not r or not r["judged"]:
        return ""
    share = f", the median one after {r['median_share_of_wait']:.0%} of the wait told" \
        if r["median_share_of_wait"] is not None else ""
    text = (f"at the latest, by runtime limits: of {counted(r['judged'], 'job')} that waited with an ETA in the "
            f"last {r['days']} days, {r['on_time']:.0%} started by the first one told{share}")
    own, missing = r.get("own_class"), e.get("likely_start_missing")
    # its class's figures once there are enough of them to tell a likely start by, as the page
    if own and own["judged"] and not (missing and missing["code"] == "too_few_of_its_size"):
        share = f", the median one after {own['median_share_of_wait']:.0%}" \
            if own["median_share_of_wait"] is not None else ""
        text += (f"; of them, {counted(own['judged'], 'job')} of {_size_class_text(own)}, as this one: "
                 f"{own['on_time']:.0%} by it{share}")
    return text


def _size_class_text(row: dict[str, Any]) -> str:
    """A size class in GPUs as the job page says it: "8+ GPUs", "fewer than 8 GPUs"."""
    return f"{row['node_gpus']}+ GPUs" if row["size_class"] == "large" else f"fewer than {row['node_gpus']} GPUs"


def _likely_start_text(e: dict[str, Any]) -> str:
    """Where a waiting job's start lands at the median share of the wait told lately by jobs of
    its size class, as the API gives it (explain's `likely_start`) and the job's page says it;
    or why there is none (`likely_start_missing`, in the page's words)."""
    likely, missing = e.get("likely_start"), e.get("likely_start_missing")
    if not likely:
        return f"none: {missing['reason']}" if missing else ""
    jobs = counted(likely["judged"], "job")
    if likely.get("size_class"):
        jobs += f" of {_size_class_text(likely)}"
    return (f"about {_eta_text(likely['at'], relative=True)}, at the median {likely['share_of_wait']:.0%} of the wait "
            f"told that {jobs} had in the last {likely['days']} days")


def _position_text(position: int | None, code: str | None, held: bool | None, resolvable: bool | None) -> str:
    """A waiting job's queue position, and, for one not in line, where that puts it, as the
    job's page says it: a held job, or one waiting for a dependency, "is not in the queue"
    (its reason says so) and is ranked after every job in line; `queue position: 8` alone
    read as eighth in line."""
    if position is None:
        return ""
    if held:
        return f"{position}, after every job in line (a held job is not in line)"
    if code == "WaitingForDependency":
        return f"{position}, after every job in line (a job waiting for a dependency is not in line)"
    if resolvable is False:
        return f"{position}, after every job that can start"
    return str(position)


def cmd_explain(api: Api, args: argparse.Namespace) -> int:
    e = api.request("GET", f"jobs/{_job_id(args.job)}/explain/")
    if args.json:
        output.emit_json(e)
        return 0
    # Its state_label in words: a job being cancelled is "stopping: cancelled", as qm list says.
    head = f"Job {e['job']} ({e['name']}) is {str(e.get('state_label') or e['state']).replace('_', ' ')}"
    print(output.visible(head + (f": {e['reason_code']}" if e["reason_code"] else ".")))
    print(f"  {output.visible(e['reason'])}")
    if e["state"] == "pending":
        start = _eta_text(e["eta"], relative=True) if e["eta"] else "unknown"
        output.fields([
            ("  queue position", _position_text(e["queue_position"], e["reason_code"], e["reason_code"] == "Held",
                                                e["resolvable"])),
            ("  earliest start", start),
            *([("  etas lately", lately)] if e["eta"] and (lately := _eta_record_text(e)) else []),
            *([("  likely start", likely)] if (likely := _likely_start_text(e)) else []),
            *([("  priority", order)] if (order := _order_text(api, e["job"])) else []),
            ("  would start if", e["would_start_if"]),
            ("  can it ever run", "yes" if e["resolvable"] else "no, not as asked: change the request"),
        ])
    elif e.get("growth_code"):
        output.fields([("  not growing", f"{e['growth_code']}: {e['growth_note']}")])
    return 0


def cmd_cancel(api: Api, args: argparse.Namespace) -> int:
    """Cancel each job named (`scancel`), or every task of an array still pending or running, or
    the jobs the filters pick (`scancel -n NAME -t PENDING -u USER`)."""
    filters = [flag for flag in ("name", "state", "user") if getattr(args, flag) is not None]
    if filters:
        if args.jobs or args.array:
            raise CliError(f"give job ids, --array, or --{filters[0]} and the other filters, not both")
        args.jobs = [str(job_id) for job_id in _jobs_picked(api, args)]
        if not args.jobs:
            print("No job matched: nothing cancelled.")
            return 0
    return _act_on_jobs(api, args, "cancel")


CANCELLABLE_STATES = ("pending", "running")


def _jobs_picked(api: Api, args: argparse.Namespace) -> list[int]:
    """The ids of the jobs `qm cancel --name/--state/--user` picks, as scancel's filters do: the
    name whole (the API's `?name=` matches a part of it: `-n train` would have cancelled
    pretrain-7b too), waiting or running (or the --state given), and the user's own jobs unless
    --user names another. All of them read before any is cancelled (a cancel moves a job out of
    the pages being read)."""
    states = [state.strip().lower() for state in args.state or CANCELLABLE_STATES]
    wrong = [state for state in states if state not in CANCELLABLE_STATES]
    if wrong:
        raise CliError(f"--state {wrong[0]}: a job that is {wrong[0]} cannot be cancelled; "
                       f"give {' or '.join(CANCELLABLE_STATES)}")
    if args.name is not None and not args.name.strip():
        raise CliError("--name is empty: give the jobs' name")
    user = args.user.strip() if args.user else None
    if args.user is not None and not user:
        raise CliError("--user is empty: give a user")
    params: dict[str, Any] = {"state": states, "user": user or _my_username(api), "limit": 1000, "ordering": "id"}
    if args.name:
        params["name"] = args.name.strip()
    picked: list[int] = []
    while True:
        page = api.request("GET", "jobs/", params=params)
        picked += [j["id"] for j in page["results"] if not args.name or j["name"] == args.name.strip()]
        if not page.get("next") or not page["results"]:
            return picked
        params["offset"] = params.get("offset", 0) + len(page["results"])


def cmd_hold(api: Api, args: argparse.Namespace) -> int:
    """Hold (`qm hold`) or release (`qm release`) each job named, or every waiting task of an
    array: as `scontrol hold/release`. A job that cannot be held (running, ended, another's
    admin hold) is an error line; the others still act."""
    return _act_on_jobs(api, args, args.command)


def cmd_requeue(api: Api, args: argparse.Namespace) -> int:
    """Requeue each job named (`scontrol requeue`; --hold: `scontrol requeuehold`), or every
    running task of an array (--states: the tasks in those states instead): a running job's
    processes get its class's grace period, then it waits again with the same id (held with
    --hold); an ended job waits again at once. A job that waits or is stopping, or an ended one
    refused, is an error line; the others still act."""
    if args.states is not None and not args.array:
        raise CliError("--states picks an array's tasks: give it with --array ARRAY_ID")
    return _act_on_jobs(api, args, "requeue")


def _act_on_jobs(api: Api, args: argparse.Namespace, verb: str) -> int:
    """POST `jobs/{id}/{verb}/` for each job named, or `job-arrays/{id}/{verb}/` once for an
    array. Every id is checked before any job is touched (a typo among them acted on the jobs
    before it and not those after); a refused job is an error line on standard error and the
    others still act. --json: the API's answer for one job; for several, one JSON list of the
    answers of the jobs acted on."""
    if args.array:
        if args.jobs:
            raise CliError("give job ids or --array, not both")
        return _act_on_array(api, args, verb)
    if not args.jobs:
        raise CliError(f"name the jobs to {verb} (qm {verb} 412 413), or --array ARRAY_ID")
    ids = [_job_id(job) for job in args.jobs]
    body = _action_body(args)
    failed, results = 0, []
    for job_id in ids:
        try:
            result = api.request("POST", f"jobs/{job_id}/{verb}/", body=body)
        except ApiError as error:
            said = output.visible(str(error))
            # "Job 5 is running: …", "No job 5, or not yours to see.": the job is named already
            named = re.match(rf"(No job|Job) {job_id}\b", said) is not None
            print(f"error: {said}" if named else f"error: job {job_id}: {said}", file=sys.stderr)
            failed += 1
            continue
        results.append(result)
        if not args.json:
            print(output.visible(result["detail"]))
    if args.json and len(ids) > 1:
        output.emit_json(results)
    elif args.json and results:
        output.emit_json(results[0])
    return 1 if failed else 0


def _act_on_array(api: Api, args: argparse.Namespace, verb: str) -> int:
    """Act on every task of an array in one request (`POST job-arrays/{id}/{verb}/`, as
    `scancel ARRAY_ID`): one line for the lot. Tasks that finished or began stopping meanwhile
    are counted apart, not as failures. One request per task took 24 s for 1,000 tasks, minutes
    for 10,000. --json: the API's answer."""
    try:
        array_id = str(uuid.UUID(args.array.strip()))
    except ValueError:
        raise CliError(f"'{args.array}' is not an array id (a UUID, as `qm submit --array` printed)") from None
    answer = api.request("POST", f"job-arrays/{array_id}/{verb}/", body=_action_body(args))  # 404: none, or not yours
    if args.json:
        output.emit_json(answer)
    else:
        print(output.visible(answer["detail"]))
    return 0


def _action_body(args: argparse.Namespace) -> dict[str, Any] | None:
    """`qm hold --reason TEXT`, `qm requeue --hold --reason TEXT`: the action's body; the other
    actions send none."""
    body: dict[str, Any] = {}
    if getattr(args, "requeue_hold", False):
        body["hold"] = True
    reason = getattr(args, "reason", None)
    if reason is not None:
        body["reason"] = reason
    states = getattr(args, "states", None)
    if states is not None:  # qm requeue --array ID --states failed,timed_out
        body["states"] = [state.strip() for state in states.split(",") if state.strip()]
    return body or None


#: `qm update` flags → the API's fields (PATCH jobs/{id}/), as `qm submit` spells them.
UPDATE_FLAGS = {"name": "name", "gpus": "gpus", "gpus_per_node": "gpus_per_node",
                "min_gpu_memory": "min_gpu_memory_gb", "cpus_per_gpu": "cpus_per_gpu",
                "memory_per_gpu": "memory_gb_per_gpu", "topology": "topology", "min_gpus": "min_gpus",
                "max_gpus": "max_gpus", "priority": "priority_class", "project": "project"}


def cmd_update(api: Api, args: argparse.Namespace) -> int:
    """Change a job (`scontrol update`): while it waits, its name, project, class, limits and
    shape, judged as a submit of the changed job would be; once it runs, its name and a lower
    runtime limit. Prints what changed, old -> new."""
    body: dict[str, Any] = {field: None if getattr(args, flag) == "none" else getattr(args, flag)
                            for flag, field in UPDATE_FLAGS.items() if getattr(args, flag) is not None}
    if args.array_limit is not None:
        return _update_array_limit(api, args, body)
    if args.no_project:
        if args.project is not None:
            raise CliError("give --project NAME or --no-project, not both")
        body["project"] = None
    if args.gpu_type:
        body["gpu_types"] = args.gpu_type
    if args.time:
        body["runtime_limit_s"] = _duration(args.time, "--time", TIME_BARE_UNIT)
    if args.checkpoint_every:
        body["checkpoint_interval_s"] = _duration(args.checkpoint_every, "--checkpoint-every")
    if args.dependency is not None:
        body["dependencies"] = update_dependency(args.dependency)  # the whole new list (`none`: []), or +=/-=
        if isinstance(body["dependencies"], dependency_text.AnyOf):
            body["dependency_mode"] = "any"  # afterok:12?afterok:13: any one of them
    if not body:
        raise CliError("name what to change: --gpus, --time, --priority, --name, --project, --gpu-type, "
                       "--dependency, ... (qm update --help)")
    return _patch_and_say(api, args, f"jobs/{_job_id(args.job)}/", body)


def _patch_and_say(api: Api, args: argparse.Namespace, path: str, body: dict[str, Any]) -> int:
    """PATCH ``path`` and print the server's sentence (or its JSON)."""
    try:
        answer = api.request("PATCH", path, body=body)
    except ApiError as error:
        # A 409 (a running job's shape) says it in a sentence naming the fields; a 400 names each.
        raise CliError(_refusal(error, args) if error.status == 400 else str(error)) from error
    if args.json:
        output.emit_json(answer)
    else:
        print(output.visible(answer["detail"]))
    return 0


def _update_array_limit(api: Api, args: argparse.Namespace, body: dict[str, Any]) -> int:
    """`qm update ARRAY_ID --array-limit N` (or a task's job id; `none` lifts it): the array's
    task limit, every task at once (`scontrol update jobid=ARRAY ArrayTaskThrottle=N`)."""
    others = [flag for flag in ("time", "checkpoint_every", "dependency", "gpu_type") if getattr(args, flag)]
    if body or others or args.no_project:
        raise CliError("--array-limit changes a whole array: give it alone (qm update ARRAY_ID --array-limit 4), "
                       "and change its tasks one by one with the other flags")
    text = args.array_limit.strip().lower()
    if text in ("none", "unlimited", "0"):
        limit = None  # Slurm's ArrayTaskThrottle=0 lifts it too
    elif text.isascii() and text.isdigit():
        limit = int(text)
    else:
        raise CliError(f"--array-limit {args.array_limit}: a number of tasks (e.g. 4), or none to lift the limit")
    try:
        array_id = str(uuid.UUID(args.job.strip()))
    except ValueError:
        task = api.request("GET", f"jobs/{_job_id(args.job)}/")  # one of its tasks: its array
        if not task.get("array_id"):
            raise CliError(f"job {task['id']} is not a task of a job array: --array-limit is an array's") from None
        array_id = task["array_id"]
    return _patch_and_say(api, args, f"job-arrays/{array_id}/", {"array_task_limit": limit})


FINISHED_STATES = {"succeeded", "failed", "cancelled", "timed_out", "unschedulable"}
EVENTS_PAGE = 1000


def _event_line(event: dict[str, Any]) -> tuple[str, str, str, str]:
    return (output.utc_text(event["created_at"], suffix=""), event["kind"], event["actor"], event["message"])


def _print_streamed(cells: Sequence[str]) -> None:
    """One line of `events --follow`: columns of fixed width, since later lines cannot widen
    the ones already printed."""
    time_, kind, actor, what = (output.visible(c) for c in cells)
    print(f"{time_:<19}  {kind:<20}  {actor:<18}  {what}".rstrip(), flush=True)


def _events_after(api: Api, job_id: int, seen: set[int], start: int) -> list[dict[str, Any]]:
    """The job's events from position `start` on (oldest first), those not yet in `seen`."""
    found: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": EVENTS_PAGE, "offset": start}
    while True:
        page = api.request("GET", f"jobs/{job_id}/events/", params=params)
        found.extend(e for e in page["results"] if e["id"] not in seen)
        if not page["next"] or not page["results"]:
            return found
        params["offset"] += len(page["results"])


def cmd_events(api: Api, args: argparse.Namespace) -> int:
    """A job's history, oldest first: each state change with who did it and why (a preemption
    names the job it made room for and what was lost). `--follow` keeps printing new events
    until the job has finished."""
    job_id = _job_id(args.job)
    if not 0 < args.interval <= 3600:  # NaN fails too; time.sleep() cannot wait `inf`
        raise CliError(f"--interval {args.interval}: give a number of seconds above 0, at most 3600")
    seen: set[int] = set()
    events = _events_after(api, job_id, seen, 0)
    if args.json and not args.follow:
        output.emit_json(events)
        return 0
    headers = ["TIME (UTC)", "EVENT", "BY", "WHAT"]
    if args.json:
        for event in events:
            output.emit_json_line(event)
    elif args.follow:
        _print_streamed(headers)
        for event in events:
            _print_streamed(_event_line(event))
    elif events:
        output.table([_event_line(e) for e in events], headers)
    else:
        print(f"Job {job_id} has no events.")
    seen.update(e["id"] for e in events)
    if not args.follow:
        return 0
    while True:
        job = api.request("GET", f"jobs/{job_id}/")
        # Events committed out of order land a little before the end: look back a few.
        fresh = _events_after(api, job_id, seen, max(0, len(seen) - 20))
        for event in fresh:
            if args.json:
                output.emit_json_line(event)
            else:
                _print_streamed(_event_line(event))
        seen.update(e["id"] for e in fresh)
        sys.stdout.flush()
        if job["state"] in FINISHED_STATES:
            if not args.json:
                code = f", exit code {job['exit_code']}" if job["exit_code"] is not None else ""
                print(output.visible(f"Job {job_id} ({job['name']}) ended {job['state']}{code}."))
            return 0
        time.sleep(args.interval)


# ------------------------------------------------------------------------------------- runs


RUNS_COLUMNS = ["RUN", "GENERATION", "BOUND (UTC)", "STARTED", "ENDED", "ELAPSED", "HOW IT ENDED", "REASON", "EXIT",
                "GPUS", "WHERE", "GPU-H", "COST", "QUOTA", "LOST GPU-H"]


def _latest_count(text: str) -> int:
    """--limit N: a whole number of runs, at least 1."""
    if not text.strip().isascii() or not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"'{text[:40]}' is not a whole number of at least 1 (the latest N runs)")
    return int(text)


def _runs_of(api: Api, job_id: int, latest: int | None = None) -> tuple[list[dict[str, Any]], int, float]:
    """The job's runs, oldest first, page by page (1,000 a request): all of them, or its
    `latest` ones; with how many it has and what they all cost (the API's `total_cost_usd`)."""
    runs: list[dict[str, Any]] = []
    want = latest
    params: dict[str, Any] = {"limit": min(EVENTS_PAGE, want or EVENTS_PAGE), "offset": 0}
    page = api.request("GET", f"jobs/{job_id}/runs/", params=params)
    if want is not None and page["count"] > want:  # the latest `want`: from count - want on
        params["offset"] = page["count"] - want
        page = api.request("GET", f"jobs/{job_id}/runs/", params=params)
    while True:
        runs.extend(page["results"])
        if not page["next"] or not page["results"] or (want is not None and len(runs) >= want):
            return (runs if want is None else runs[:want]), page["count"], page["total_cost_usd"]
        params["offset"] += len(page["results"])
        page = api.request("GET", f"jobs/{job_id}/runs/", params=params)


def _run_where(run: dict[str, Any]) -> str:
    """ "h100-1×2", a heterogeneous gang's roles named: "a100-0×1(ps),a100-1×2(worker)"."""
    return ",".join(f"{g['node']}×{len(g['gpu_indices'])}" + (f"({g['role']})" if g["role"] else "")
                    for g in run["placement"])


def _run_row(run: dict[str, Any]) -> list[Any]:
    if run["ended_at"]:
        ended = output.utc_text(run["ended_at"], suffix="")
    elif run["stop_deadline"]:
        ended = "stopping by " + output.utc_text(run["stop_deadline"], suffix="")
    else:
        ended = "running" if run["started_at"] else "starting"
    generation = str(run["generation"]) + (f" (fenced: {run['fenced_generation']})" if run["fenced_generation"] else "")
    return [
        run["run"], generation, output.utc_text(run["bound_at"], suffix=""),
        output.utc_text(run["started_at"], suffix=""), ended, output.clock(run["elapsed_s"]), run["ended_how"],
        run["reason"], "" if run["exit_code"] is None else run["exit_code"], run["gpus"], _run_where(run),
        f"{run['gpu_hours']:.2f}", f"${run['cost_usd']:,.2f}", "borrowed" if run["borrowed"] else "own",
        "" if run["lost_gpu_hours"] is None else f"{run['lost_gpu_hours']:.2f}",
    ]


#: How each queue-order plugin sorts, in the words `qm sprio` heads its table with.
QUEUE_ORDER_WORDS = {
    "priority_fair_share": "higher PRIORITY first (the class's value + AGE, the points waiting added); among equals "
                           "the lower team SHARE, then the shorter LIMIT, then the earlier submission",
    "priority_fifo": "higher PRIORITY first (the class's value + AGE); among equals the earlier submission",
    "fifo": "submission order alone",
}


def cmd_sprio(api: Api, args: argparse.Namespace) -> int:
    """Slurm's sprio: the waiting jobs you may see in queue order, with what places each there."""
    params = {"job": ",".join(str(_job_id(j)) for j in args.jobs)} if args.jobs else {}
    body = api.request("GET", "jobs/priority/", params=params)
    if args.json:
        output.emit_json(body)
        return 0
    print(f"Queue order ({body['queue_order']}): {QUEUE_ORDER_WORDS.get(body['queue_order'], body['queue_order'])}.")
    if not body["jobs"]:
        print(("None of those jobs is" if args.jobs else "No job of yours is") + " in line"
              + f" ({counted(body['in_line'], 'job')} in line in all; held jobs and jobs waiting for a dependency "
                "are not in line).")
        return 0
    output.table(
        [(r["order"], r["job"], r["name"], r["team"], r["priority_class"], f"{r['effective_priority']:g}",
          f"{r['class_value']:g}", f"{r['aging_points']:g}", f"{r['team_share']:.3f}",
          output.human_duration(r["runtime_limit_s"]) if r["runtime_limit_s"] else "-") for r in body["jobs"]],
        ["ORDER", "ID", "NAME", "TEAM", "CLASS", "PRIORITY", "= CLASS", "+ AGE", "SHARE", "LIMIT"],
    )
    print(f"{counted(body['in_line'], 'job')} in line in all; ORDER is the next cycle's.")
    return 0


def cmd_sshare(api: Api, args: argparse.Namespace) -> int:
    """Slurm's sshare: every team's fair share, lowest first (the order the queue favours)."""
    body = api.request("GET", "scheduler/fair-share/")
    if args.json:
        output.emit_json(body)
        return 0
    output.table(
        [(r["team"], f"{r['dominant_share']:.3f}", r["dominant_resource"] or "-",
          f"{r['shares']['gpus']:.3f}", f"{r['shares']['cpus']:.3f}", f"{r['shares']['memory']:.3f}",
          r["held_now"]["gpus"], f"{r['decayed_usage']['gpu_hours']:,.1f}") for r in body["teams"]],
        ["TEAM", "SHARE", "OF", "GPU SHARE", "CPU SHARE", "MEM SHARE", "GPUS HELD", "GPU-H DECAYED"],
    )
    print(f"SHARE: the largest of a team's GPU, CPU and memory shares (held now + past usage decayed with a "
          f"{output.human_duration(body['half_life_s'])} half-life, over the fleet); among jobs of equal "
          f"priority the team with the lower share goes first (qm sprio).")
    return 0


def cmd_config(api: Api, args: argparse.Namespace) -> int:
    """Slurm's `scontrol show config`: the scheduling policy in force, the loop's timings and
    the leader now."""
    body = api.request("GET", "scheduler/policy/")
    if args.json:
        output.emit_json(body)
        return 0

    def said(value: Any) -> str:
        if isinstance(value, dict):
            return ", ".join(f"{k}={said(v)}" for k, v in value.items())
        if isinstance(value, list):
            return ",".join(said(v) for v in value)
        return str(value).lower() if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) else str(value)

    output.fields([(name, said(value)) for name, value in body["engine"].items()])
    print()
    output.fields([(name, said(value)) for name, value in body["loop"].items()])
    leader = body["leader"]
    print()
    if leader is None or not leader["holder"]:
        print("No scheduling cycle has run yet.")
    else:
        output.fields([("leader", f"{leader['holder']} (epoch {leader['epoch']})"),
                       ("last cycle", f"{output.utc_text(leader['last_cycle_at'])} "
                                      f"({leader['last_cycle_ms'] or 0:.0f} ms; {leader['cycles']} cycles)")])
    return 0


def cmd_sinfo(api: Api, args: argparse.Namespace) -> int:
    """Slurm's sinfo for a GPU fleet: per pool its nodes and GPUs (held, free, away), the largest
    free block and the GPUs stranded by fragmentation, then the queue's depth."""
    fragmentation = api.request("GET", "metrics/fragmentation/")
    queue = api.request("GET", "metrics/queue/")
    if args.json:
        output.emit_json({"fragmentation": fragmentation, "queue": queue})
        return 0
    output.table(
        [(p["pool"], p["gpu_type"], p["nodes"], p["whole_free_nodes"], p["partially_used_nodes"], p["total_gpus"],
          p["allocated_gpus"], p["free_gpus"], p["unavailable_gpus"], p["largest_free_block"], p["stranded_gpus"])
         for p in fragmentation["pools"]],
        ["POOL", "GPU TYPE", "NODES", "WHOLE FREE", "PART USED", "GPUS", "HELD", "FREE", "AWAY", "LARGEST FREE",
         "STRANDED"],
    )
    reasons = ", ".join(f"{n} {code}" for code, n in sorted(queue["pending_by_reason"].items(), key=lambda kv: -kv[1]))
    print(f"Queue: {counted(queue['pending_jobs'], 'job')} waiting for {counted(queue['pending_gpus'], 'GPU')}"
          + (f" ({reasons})" if reasons else "") + f"; {counted(queue['running_jobs'], 'job')} running on "
          f"{counted(queue['running_gpus'], 'GPU')}.")
    print("AWAY: free GPUs on nodes that take no work (not ready, or in a maintenance window). STRANDED: free GPUs "
          "on partly used nodes while a job needing whole nodes of the pool waits.")
    return 0


def cmd_runs(api: Api, args: argparse.Namespace) -> int:
    """A job's runs, oldest first, as `sacct --duplicates` lists a requeued job's: one per bind
    (preempted and requeued, stopped to resize, fenced, requeued after it ended, its last run),
    with when each was bound, started and ended, how it ended and why, where, the GPU-hours it
    held, what it cost (as showback charges it), its quota (own or borrowed) and the work its
    requeue lost; then the stops' notices and the totals. --limit N: its latest N runs."""
    job_id = _job_id(args.job)
    runs, count, total_cost = _runs_of(api, job_id, args.limit)
    if args.json:
        output.emit_json(runs)
        return 0
    if not runs:
        print(f"Job {job_id} has no runs: it was never bound to GPUs.")
        return 0
    output.table([_run_row(run) for run in runs], RUNS_COLUMNS)
    for run in runs:
        if run["notice"]:
            print(output.visible(f"run {run['run']}: {run['notice']}"))
        after = run["requeued_after_end"]
        if after:
            held = " held" if after["held"] else ""
            why = f": {after['reason']}" if after["reason"] else ""
            print(output.visible(f"run {run['run']}: then requeued{held} after it ended, by {after['by'] or 'someone'} "
                                 f"at {output.utc_text(after['at'])}{why}"))
    held = sum(run["gpu_hours"] for run in runs)
    lost = sum(run["lost_gpu_hours"] or 0 for run in runs)
    cost = sum(round(run["cost_usd"] * 100) for run in runs) / 100  # whole cents: they add up exactly
    requeued = sum(1 for run in runs if run["outcome"] == "requeued")
    which = counted(len(runs), "run") if len(runs) == count else \
        f"Latest {len(runs)} of {count} runs ({runs[0]['run']}–{runs[-1]['run']})"
    print(f"{which}, {requeued} ended in a requeue; {held:,.2f} GPU-hours held, costing ${cost:,.2f}; "
          f"{lost:,.2f} GPU-hours of work lost.")
    if len(runs) < count:
        print(f"All {count} runs cost ${total_cost:,.2f}; `qm runs {job_id}` lists them all.")
    return 0


# ------------------------------------------------------------------------------------- logs


class _RankOutput:
    """One rank's output as `qm logs` prints it: raw, or each line prefixed `[rank N] ` (a
    line that has not ended yet waits for its end, so two ranks' halves never share a line)."""

    def __init__(self, rank: int, prefixed: bool) -> None:
        self.rank, self.prefixed, self.partial = rank, prefixed, ""
        self.next_offset: int | None = None

    def write(self, text: str) -> None:
        if not self.prefixed:
            sys.stdout.write(text)
            return
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        for line in lines:
            sys.stdout.write(f"[rank {self.rank}] {line}\n")

    def close(self) -> None:
        if self.prefixed and self.partial:
            sys.stdout.write(f"[rank {self.rank}] {self.partial}\n")
            self.partial = ""


def _read_logs(api: Api, job_id: int, params: dict[str, Any]) -> dict[str, Any]:
    return api.request("GET", f"jobs/{job_id}/logs/", params={k: v for k, v in params.items() if v is not None})


def cmd_logs(api: Api, args: argparse.Namespace) -> int:
    """A job's output (stdout and stderr), as its agents shipped it: rank 0 of its latest run by
    default. --follow keeps printing what comes until the job has ended (Ctrl-C stops it). What
    qm says about the output (pruned bytes, a new run) goes to standard error, so standard
    output holds the job's own bytes only."""
    job_id = _job_id(args.job)
    if args.tail is not None and not 0 < args.tail <= 10_000:
        raise CliError(f"--tail {args.tail}: give a number of lines from 1 to 10000")
    if not 0 < args.interval <= 3600:
        raise CliError(f"--interval {args.interval}: give a number of seconds above 0, at most 3600")
    if args.rank is not None and args.rank < 0:
        raise CliError(f"--rank {args.rank}: ranks count from 0")
    first = _read_logs(api, job_id, {"rank": args.rank or 0, "generation": args.generation, "tail_lines": args.tail})
    generation = first["generation"]
    ranks = (first["ranks"] or [0]) if args.all_ranks else [args.rank or 0]
    outputs = {rank: _RankOutput(rank, prefixed=args.all_ranks) for rank in ranks}

    def say(words: str) -> None:
        if not args.json:
            sys.stdout.flush()
            print(output.visible(words), file=sys.stderr, flush=True)

    def show(rank: int, reply: dict[str, Any]) -> bool:
        outputs[rank].next_offset = reply["next_offset"]
        if args.json:
            if reply["text"] or not args.follow:
                output.emit_json_line(reply)
            return bool(reply["text"])
        if reply["notice"] and (reply["text"] or not args.follow):
            say(reply["notice"])
        outputs[rank].write(reply["text"])
        return bool(reply["text"])

    def drain(rank: int, reply: dict[str, Any]) -> bool:
        """Show `reply` and what is stored after it now; whether any text came."""
        got = show(rank, reply)
        while reply["more"]:
            reply = _read_logs(api, job_id, {"rank": rank, "generation": reply["generation"],
                                             "offset": reply["next_offset"]})
            got = show(rank, reply) or got
        return got

    def close() -> None:
        for out in outputs.values():
            out.close()
        sys.stdout.flush()

    for rank in ranks:
        drain(rank, first if rank == first["rank"] else _read_logs(
            api, job_id, {"rank": rank, "generation": generation, "tail_lines": args.tail}))
    sys.stdout.flush()
    if not args.follow:
        close()
        return 0
    if first["job_state"] in FINISHED_STATES:
        close()
        say(f"--- job {job_id} ended {first['job_state']} ---")
        return 0
    # Ctrl-C ends the follow between two reads, not inside one: a KeyboardInterrupt raised in
    # the middle of an HTTP request could leave the connection pool's lock held, and the
    # process hung on its way out (seen under load). A second Ctrl-C interrupts at once.
    with _ctrl_c_between_rounds() as stopped:
        while not stopped.wait(args.interval):
            got = False
            latest: dict[str, Any] = {}
            for rank, out in list(outputs.items()):
                latest = _read_logs(api, job_id, {"rank": rank, "generation": generation, "offset": out.next_offset})
                got = drain(rank, latest) or got
            sys.stdout.flush()
            if generation is None and latest["generation"] is not None:
                generation = latest["generation"]  # its first run began: what was read is its output
                say(f"--- job {job_id} started: generation {generation} ---")
            elif args.generation is None and latest["generations"] and latest["generations"][-1] != generation:
                # The job runs again (requeued, preempted): follow the new run from its first byte.
                close()
                generation = latest["generations"][-1]
                say(f"--- job {job_id} runs again: generation {generation} ---")
                outputs = {rank: _RankOutput(rank, prefixed=args.all_ranks) for rank in outputs}
                for out in outputs.values():
                    out.next_offset = 0
                continue
            if args.all_ranks:
                for rank in latest["ranks"]:
                    if rank not in outputs:  # a rank that wrote its first bytes since
                        outputs[rank] = _RankOutput(rank, prefixed=True)
                        outputs[rank].next_offset = 0
            if latest["job_state"] in FINISHED_STATES and not got:
                # Ended, and a round brought nothing more: its last lines came with the exit (more
                # than 64 KiB a rank follow within a second, and are read above while they come).
                close()
                say(f"--- job {job_id} ended {latest['job_state']} ---")
                return 0
    close()
    return 130


class _CtrlC:
    """Whether Ctrl-C was pressed. The handler only sets a flag (it takes no lock: one taken
    inside a handler can be the lock the interrupted code holds)."""

    def __init__(self) -> None:
        self.pressed = False

    def wait(self, seconds: float) -> bool:
        """Sleep up to `seconds`, in short naps so a Ctrl-C ends it soon; whether it came."""
        until = time.monotonic() + seconds
        while not self.pressed and (left := until - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))
        return self.pressed


@contextlib.contextmanager
def _ctrl_c_between_rounds() -> Iterator[_CtrlC]:
    """While inside, the first Ctrl-C is noted (the loop stops at its next check) instead of
    raising; a second one raises KeyboardInterrupt as usual."""
    ctrl_c = _CtrlC()

    def on_ctrl_c(signum: int, frame: Any) -> None:
        if ctrl_c.pressed:
            raise KeyboardInterrupt
        ctrl_c.pressed = True

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield ctrl_c
    finally:
        signal.signal(signal.SIGINT, previous)


# ---------------------------------------------------------------------------------- history

#: The states a job can end in: what `qm history` lists (pending and running jobs: `qm list`).
ENDED_STATES = ["succeeded", "failed", "cancelled", "timed_out"]
HISTORY_COLUMNS = ["JOBID", "NAME", "TEAM", "USER", "STATE", "EXIT", "START", "ELAPSED", "GPUS", "GPU-H",
                   "LOST-GPU-H", "NODES"]
HISTORY_PAGE = 1000  # the API's largest page


def _when(text: str, flag: str, now: datetime) -> datetime:
    try:
        return output.parse_when(text, now)
    except ValueError as exc:
        raise CliError(f"{flag}: {exc}") from exc


def _history_window(args: argparse.Namespace, now: datetime) -> tuple[datetime, datetime]:
    """[since, until): by default from 00:00 UTC today (sacct's default start) to now."""
    since = _when(args.since, "--since", now) if args.since else _when("today", "--since", now)
    until = _when(args.until, "--until", now) if args.until else now
    if until <= since and not args.until:
        raise CliError(f"--since {output.utc_text(since.isoformat())} is not in the past (it is "
                       f"{output.utc_text(now.isoformat())}): nothing can have ended since")
    if until <= since:
        raise CliError(f"--until {output.utc_text(until.isoformat())} is not after --since "
                       f"{output.utc_text(since.isoformat())}: give a window that ends after it starts")
    return since, until


def _history_jobs(api: Api, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Every job of the window, page by page (1,000 a request), oldest end first. The window's
    end is fixed before the first page, so a job ending meanwhile cannot shift the pages."""
    jobs: list[dict[str, Any]] = []
    params = {**params, "limit": HISTORY_PAGE, "offset": 0}
    while True:
        page = api.request("GET", "jobs/", params=params)
        jobs.extend(page["results"])
        if not page.get("next") or not page["results"]:
            return jobs
        params["offset"] += len(page["results"])


def _nodes_cell(nodes: list[str]) -> str:
    """In the table at most three (`h100-01,h100-02,+6`); JSON and the CSV name every one."""
    if len(nodes) <= 3:
        return ",".join(nodes)
    return ",".join(nodes[:2]) + f",+{len(nodes) - 2}"


def _history_row(job: dict[str, Any]) -> list[Any]:
    return [
        job["id"], job["name"], job["team"], job["submitter"] or "", _state(job),
        "" if job["exit_code"] is None else job["exit_code"], output.utc_text(job["started_at"], suffix=""),
        output.clock(job["elapsed_s"]) if job.get("elapsed_s") is not None else "",
        job["gpus"], f"{job['gpu_hours']:.2f}", f"{job['lost_gpu_hours']:.2f}",
        _nodes_cell(job.get("ran_on") or []),
    ]


def _history_totals(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    states: dict[str, int] = {}
    for job in jobs:
        states[job["state"]] = states.get(job["state"], 0) + 1
    return {"jobs": len(jobs), "states": dict(sorted(states.items(), key=lambda kv: (-kv[1], kv[0]))),
            "gpu_hours": round(sum(j["gpu_hours"] for j in jobs), 4),
            "lost_gpu_hours": round(sum(j["lost_gpu_hours"] for j in jobs), 4)}


def cmd_history(api: Api, args: argparse.Namespace) -> int:
    """The jobs that ended in a window, as `sacct` lists them: how each ended (state, exit code),
    when it started and how long its last run took, its GPUs, the GPU-hours it held over all its
    runs and those its preemptions threw away, the nodes it ran on; then the totals. The CSV is
    the server's (`GET jobs/history.csv`, the history page's Download CSV), written as it comes."""
    now = datetime.now(timezone.utc)
    since, until = _history_window(args, now)
    fmt = "json" if args.json else args.format
    params: dict[str, Any] = {
        "state": args.state or ENDED_STATES, "finished_after": since.isoformat(),
        "finished_before": until.isoformat(),
    }
    for flag, field in (("user", "user"), ("team", "team"), ("node", "ran_on"), ("name", "name"),
                        ("exit_code", "exit_code")):
        if getattr(args, flag) is not None:
            params[field] = getattr(args, flag)
    if fmt == "csv":
        # Byte for byte what the page and the API give for these filters: one writer, the server's.
        text = api.request("GET", "jobs/history.csv", params=params, raw=True)
        raw = getattr(sys.stdout, "buffer", None)  # the bytes as sent, whatever the locale's encoding
        if raw is None:
            sys.stdout.write(text)
            return 0
        sys.stdout.flush()
        raw.write(text.encode("utf-8"))
        raw.flush()
        return 0
    jobs = _history_jobs(api, {**params, "ordering": "finished_at"})
    totals = _history_totals(jobs)
    if fmt == "json":
        output.emit_json({"since": since.isoformat(), "until": until.isoformat(), "totals": totals, "jobs": jobs})
        return 0
    window = f"{output.utc_text(since.isoformat(), suffix='')} → {output.utc_text(until.isoformat())}"
    if not jobs:
        if _reads_no_jobs(api):
            print("Finance accounts see no jobs: jobs belong to teams. `qm showback` shows what they cost.")
            return 0
        print(f"No job ended {window}" + ("" if args.since else " (since 00:00 UTC today; --since for earlier)")
              + ". Pending and running jobs: qm list.")
        return 0
    output.table([_history_row(job) for job in jobs], HISTORY_COLUMNS)
    ended = ", ".join(f"{n} {state.replace('_', ' ')}" for state, n in totals["states"].items())
    print(output.visible(
        f"{counted(totals['jobs'], 'job')} ended {window}: {ended}; {totals['gpu_hours']:,.2f} GPU-hours held, "
        f"{totals['lost_gpu_hours']:,.2f} GPU-hours of work lost to preemptions and requeues."))
    return 0


# --------------------------------------------------------------------------------- showback


IDLE_ENTRY = "__idle__"
SHOWBACK_COLUMNS = [
    ("GPU-H ALLOC", "gpuHours"), ("GPU-H ACTIVE", "gpuHoursActive"), ("GPU-H PRODUCTIVE", "gpuHoursProductive"),
    ("COST $", "totalCost"), ("$/GPU-H", "usdPerGpuHour"), ("$/1M TOKENS", "usdPerMillionTokens"),
    ("COST W/O TOKENS $", "costWithoutTokens"),
    ("IDLE RESERVED $", "idleReservedCost"), ("PREEMPTION WASTE $", "preemptionWasteCost"),
]


def _money(value: Any, key: str) -> str:
    if value is None:
        return "-"
    if key == "usdPerMillionTokens":
        # Per million tokens, fixed-point with the CSV's six places: per token it printed
        # `5.42e-08`, a unit and a notation no other view of showback uses.
        return f"{value:,.6f}"
    return f"{value:,.2f}"


def cmd_showback(api: Api, args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"group_by": args.by}
    if args.month:
        params["month"] = args.month
    else:
        params["window"] = args.window
    if args.csv:
        params["format"] = "csv"
        sys.stdout.write(api.request("GET", "showback/", params=params, raw=True))
        return 0
    report = api.request("GET", "showback/", params=params)
    if args.json:
        output.emit_json(report)
        return 0
    window = report.get("window", {})
    # The window's ends as every other qm command says a time (the raw ISO text before).
    print(f"Showback by {args.by}, {output.utc_text(window.get('start'), '')} → "
          f"{output.utc_text(window.get('end'))} ({report.get('currency', 'USD')})")
    allocations: dict[str, Any] = {}
    for chunk in report.get("data", []):
        allocations.update(chunk)
    # Job ids in numeric order (as text, job 100 came between 10 and 11).
    ordered = sorted(allocations.items(), key=lambda item: (0, int(item[0]), "") if item[0].isascii() and item[0].isdigit() else (1, 0, item[0]))
    # __idle__'s GPU-hours are capacity no job held (OpenCost's convention): not allocated hours,
    # so its GPU-hour cells stay empty and the columns add up to TOTAL; a line below says them.
    # A job row says whose job it is (its id alone sent finance to look each one up).
    named = ("job", "team", "project") if args.by == "job" else ()
    rows = [[name] + [str((a.get("properties") or {}).get(p) or "-") for p in named]
            + [("-" if name == IDLE_ENTRY and key.startswith("gpuHours") else _money(a.get(key), key))
               for _, key in SHOWBACK_COLUMNS] for name, a in ordered]
    totals = report.get("totals") or {}
    if totals:
        rows.append(["TOTAL"] + ["" for _ in named] + [_money(totals.get(key), key) for _, key in SHOWBACK_COLUMNS])
    if not allocations:
        print("Nothing recorded in this window.")
        return 0
    output.table(rows, [args.by.upper()] + [{"job": "NAME"}.get(p, p.upper()) for p in named]
                 + [h for h, _ in SHOWBACK_COLUMNS])
    idle = allocations.get(IDLE_ENTRY)
    if idle and idle.get("gpuHours") is not None:
        print(f"{IDLE_ENTRY}: {idle['gpuHours']:,.2f} GPU-hours of capacity no job held "
              f"(cost ${_money(idle.get('totalCost'), 'totalCost')}).")
    if idle and totals.get("usdPerGpuHour") is not None:
        # TOTAL's $/GPU-H (13.50 beside rows of 1.54 and 0.80 on the demo) said nothing of why.
        print("TOTAL's $/GPU-H is the fully loaded price: what the fleet cost, idle capacity included, per "
              "GPU-hour the jobs held.")
    for u in report.get("unpriced") or []:
        # GPU time no price rate covered is counted at $0 in every figure above: say where.
        since = f"before its first rate ({output.utc_text(u['pricedFrom'])})" if u.get("pricedFrom") else "no rate at all"
        print(output.visible(f"Not priced, counted at $0.00: {u['gpuType']} {u['capacityTier']} ({since}): "
                             f"{u['capacityGpuHours']:,.2f} GPU-hours of capacity, {u['allocatedGpuHours']:,.2f} "
                             "held by jobs. Add a price rate for it (admin)."))
    if totals.get("idleReservedCost"):
        # TOTAL's IDLE RESERVED $ sat beside its COST $ unexplained: finance added the two.
        print("IDLE RESERVED $: guarantees neither used nor lent, at the reserved rate; a reading of the idle "
              "capacity, not a charge: not in COST $ or TOTAL.")
    return 0


# ----------------------------------------------------------------------------------- quotas


def _limit(value: int | None) -> str:
    """A borrowing or lending limit; an unset one is unlimited ("none" read as zero), as the admin says."""
    return "no limit" if value is None else str(value)


def cmd_quotas(api: Api, args: argparse.Namespace) -> int:
    """Your team's quotas (admins and finance: every team's) with what each holds now."""
    params: dict[str, Any] = {"limit": 1000}
    if args.team:
        params["team"] = args.team
    page = api.request("GET", "quotas/", params=params)
    if args.json:
        output.emit_json(page)
        return 0
    rows = sorted(page["results"], key=lambda q: (q["team"], q["gpu_type"]))
    if not rows:
        print("No quota" + (f" for team {args.team}." if args.team else " you can see."))
        return 0
    output.table(
        [(q["team"], q.get("cohort") or "-", q["gpu_type"], q["nominal_gpus"], _limit(q["borrowing_limit"]),
          _limit(q["lending_limit"]), q["held_gpus"], q["borrowed_gpus"],
          quota_text.lent_said(q.get("lent_gpus") or 0)) for q in rows],
        ["TEAM", "COHORT", "GPU TYPE", "NOMINAL", "MAY BORROW", "MAY LEND", "HELD NOW", "BORROWED", "LENT NOW"],
    )
    if any(quota_text.is_share(q.get("lent_gpus") or 0) for q in rows):
        print()
        print(output.visible(quota_text.LENT_SHARE_NOTE))
    return 0


# ------------------------------------------------------------------------------------ nodes


NODE_ACTIONS = ("cordon", "drain", "uncordon", "retire", "return")


def _node_state(node: dict[str, Any]) -> str:
    """A node away (down, quarantined, or suspect after a cordon) that an operator cordoned comes
    back cordoned: say so; a retired node says since when."""
    if node["state"] == "retired" and node.get("retired_at"):
        return f"retired {str(node['retired_at'])[:10]}"
    if node["state"] in ("down", "quarantined", "suspect") and node.get("unschedulable"):
        why = f": {node['cordon_reason']}" if node.get("cordon_reason") else ""
        return f"{node['state']} (returns cordoned{why})"
    if node.get("cordon_reason"):  # why an operator took it out of service (sinfo -R)
        return f"{node['state']}: {node['cordon_reason']}"
    if node.get("maintenance_window") is not None:  # it takes no work until the window ends
        ends = str(node.get("maintenance_ends_at") or "")[11:16]
        return f"{node['state']} (maintenance {node['maintenance_window']}" + (f" until {ends} UTC)" if ends else ")")
    return str(node["state"])


def cmd_nodes(api: Api, args: argparse.Namespace) -> int:
    """`qm nodes` lists the fleet (the API leaves retired nodes out: ?retired=false), `--retired`
    only the retired ones, `--all` both; `qm nodes ACTION NODE` acts on one node, as `qm cordon
    NODE` does."""
    if args.action is not None:
        if args.action not in NODE_ACTIONS:
            raise CliError(f"unknown node action '{args.action}': one of {', '.join(NODE_ACTIONS)} "
                           "(e.g. `qm nodes retire NODE`)")
        if not args.node:
            raise CliError(f"`qm nodes {args.action}` needs a node name: qm nodes {args.action} NODE")
        return _node_action(api, args, args.action)
    if args.node:
        raise CliError(f"`qm nodes` takes no node name alone: `qm nodes ACTION {args.node}` with ACTION one of "
                       + ", ".join(NODE_ACTIONS))
    if getattr(args, "reason", None) is not None:
        raise CliError("--reason goes with an action: qm nodes drain NODE --reason \"bad DIMM\"")
    if args.all and args.retired:
        raise CliError("--all and --retired do not go together: --all lists every node, --retired only the retired")
    params: dict[str, Any] = {"limit": 1000}
    if not args.all:
        params["retired"] = "true" if args.retired else "false"
    page = api.request("GET", "nodes/", params=params)
    rows = page["results"]
    if args.json:
        output.emit_json(page)
        return 0
    output.table(
        [(n["name"], n["pool"], n["gpu_type"], f"{n['allocated_gpus']}/{n['gpu_count']}", _node_state(n), n["leaf_switch"],
          output.age(n["last_heartbeat_at"])) for n in rows],
        ["NODE", "POOL", "GPU TYPE", "GPUS USED", "STATE", "LEAF", "HEARTBEAT"],
    )
    if int(page.get("count", len(rows))) > len(rows):
        print(f"{len(rows)} of {page['count']} nodes shown (the API's largest page): filter with the API "
              "(nodes/?pool=…, ?state=…) for the rest")
    if not args.all and not args.retired:
        retired = api.request("GET", "nodes/", params={"retired": "true", "limit": 1})
        hidden = int(retired.get("count", 0))
        if hidden:
            print(f"{hidden} retired node{'s' if hidden > 1 else ''} not shown, out of the fleet: "
                  "qm nodes --retired lists them (--all with the rest)")
    elif args.retired and not rows:
        print("No retired nodes.")
    return 0


def cmd_node_action(api: Api, args: argparse.Namespace) -> int:
    return _node_action(api, args, args.command)


def _node_action(api: Api, args: argparse.Namespace, action: str) -> int:
    found = api.request("GET", "nodes/", params={"name": args.node})["results"]
    if not found:
        raise CliError(f"no node named '{args.node}'")
    reason = getattr(args, "reason", None)
    if reason is not None and action not in ("cordon", "drain"):
        raise CliError(f"--reason goes with cordon or drain, not {action}")
    node = api.request("POST", f"nodes/{found[0]['id']}/{action}/",
                       body={"reason": reason} if reason is not None else None)
    if args.json:
        output.emit_json(node)
    elif node.get("detail") and action in ("cordon", "drain", "uncordon"):
        print(output.visible(node["detail"]))  # what it did, and the jobs a cordon or drain leaves running there
    elif node["state"] == "retired":
        print(output.visible(f"{node['name']} is retired: out of the fleet (no work, no capacity, its agent refused) "
                             f"until an admin returns it to service (qm nodes return {node['name']})."))
    elif action == "return":
        print(output.visible(f"{node['name']} is {node['state']}: back in the fleet, until its agent registers "
                             "again; it then comes back " + ("cordoned (qm uncordon it to take work)."
                                                            if node.get("unschedulable") else "ready.")))
    else:
        away = node["state"] in ("down", "quarantined") or (node["state"] == "suspect" and node.get("unschedulable"))
        back = (" It returns " + ("cordoned" if node.get("unschedulable") else "ready") + " when its agent "
                + ("heartbeats" if node["state"] == "suspect" else "registers") + " again.")
        print(output.visible(f"{node['name']} is {node['state']}." + (back if away else "")))
    return 0


# ------------------------------------------------------------------------------ notifications


NOTIFY_EVENTS = ("started", "succeeded", "failed", "timed_out", "cancelled", "preempted", "requeued", "unschedulable")
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
        raise CliError(f"'{text}' is not a hook id: `qm notify list` shows them") from None


def _hook_refused(error: ApiError, flags: dict[str, str]) -> CliError | ApiError:
    """The API's field errors, each with the flag that gave it."""
    if not error.errors:
        return error
    return CliError("Invalid request." + "".join(
        f"\n  {field} ({flags.get(field.split('.')[0], field)}): {' '.join(msgs)}"
        for field, msgs in error.errors.items()))


def _signature_help(hook: dict[str, Any], verb: str) -> None:
    print(output.visible(f"Its {verb} secret (shown once; receivers check X-Quartermaster-Signature with it): "
                         f"{hook['secret']}"))
    print("Receivers check: X-Quartermaster-Signature == 'sha256=' + hex HMAC-SHA256 of the raw body with it.")


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
        raise CliError("Nothing to change: give --hook-url, --events, --team or --own-jobs, --pause or --resume "
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
    print(output.visible(f"Hook {hook['id']} now POSTs {', '.join(hook['events'])} of {whose} to {hook['url']}."
                         + state))
    if "url" in body:
        print(f"Deliveries still queued go to the new URL at their next attempt. Try it: qm notify test {hook['id']}")
    return 0


def cmd_notify(api: Api, args: argparse.Namespace) -> int:
    """`qm notify add|list|edit|rotate|history|rm|test`: webhooks for your jobs' events (notification-hooks/)."""
    action = args.notify_action
    if action == "add":
        body: dict[str, Any] = {"url": args.hook_url, "events": _notify_events(args.events)}
        if args.team:
            body["team"] = args.team
        if args.secret:
            body["secret"] = args.secret
        try:
            hook = api.request("POST", "notification-hooks/", body=body)
        except ApiError as error:
            raise _hook_refused(error, {"url": "URL", "events": f"--events {args.events}",
                                        "team": f"--team {args.team}", "secret": "--secret"}) from None
        if args.json:
            output.emit_json(hook)
            return 0
        whose = f"every job of team {hook['team']}" if hook["team"] else "your own jobs"
        print(output.visible(f"Hook {hook['id']} POSTs {', '.join(hook['events'])} of {whose} to {hook['url']}."))
        print(output.visible(f"Its secret (shown once; receivers check X-Quartermaster-Signature with it): "
                             f"{hook['secret']}"))
        print(f"Try it: qm notify test {hook['id']}")
        return 0
    if action == "list":
        page = api.request("GET", "notification-hooks/", params={"limit": 1000})
        if args.json:
            output.emit_json(page)
            return 0
        rows = page["results"]
        if not rows:
            print("No notification hooks. Add one: qm notify add URL --events started,failed")
            return 0
        output.table([(h["id"], h["url"], ",".join(h["events"]), h["team"] or "(own jobs)",
                       "yes" if h["active"] else "paused",
                       h["status"] if h.get("deliverable", True) else "NOT DELIVERING: see below") for h in rows],
                     ["ID", "URL", "EVENTS", "TEAM", "ACTIVE", "STATUS"])
        for h in rows:  # each POST of such a hook is refused here: say why and what to do
            if not h.get("deliverable", True):
                fix = ("https://... (the receiver's https address)" if h["url"].startswith("http://")
                       else "URL (one the rule above allows)")
                print()
                print(output.visible(f"Hook {h['id']} is not delivering: every POST to {h['url']} is refused here: "
                                     f"{h['undeliverable_reason']}"))
                print(f"  Fix it: qm notify edit {h['id']} --hook-url {fix}")
        return 0
    hook_id = _hook_id(args.hook)
    if action == "edit":
        return _notify_edit(api, args, hook_id)
    if action == "rotate":
        hook = api.request("POST", f"notification-hooks/{hook_id}/rotate-secret/")
        if args.json:
            output.emit_json(hook)
            return 0
        print(f"Hook {hook['id']} has a new signing secret: the old one is refused from now on, retries of older "
              "deliveries included.")
        _signature_help(hook, "new")
        return 0
    if action == "history":
        changes = api.request("GET", f"notification-hooks/{hook_id}/history/")
        if args.json:
            output.emit_json(changes)
            return 0
        if not changes:
            print(f"Hook {hook_id} has no recorded changes (it was made before changes were recorded).")
            return 0
        output.table([(c["at"][:19].replace("T", " "), c["actor"].removeprefix("user:"), c["message"])
                      for c in changes], ["AT (UTC)", "BY", "CHANGE"])
        return 0
    if action == "rm":
        api.request("DELETE", f"notification-hooks/{hook_id}/")
        if args.json:
            output.emit_json({"deleted": hook_id})
        else:
            print(f"Hook {hook_id} removed, with the deliveries it still had to send.")
        return 0
    answer = api.request("POST", f"notification-hooks/{hook_id}/test/")
    if args.json:
        output.emit_json(answer)
    else:
        print(output.visible(answer["detail"]))
    return 0 if answer["delivered"] else 1


# ------------------------------------------------------------------------------- maintenance


#: The API's fields as `qm maint` flags, so a refusal names the flag as typed.
MAINT_FLAGS = {"nodes": "--nodes", "pool": "--pool", "start_at": "--start", "end_at": "--end",
               "duration_s": "--duration", "reason": "--reason"}


def maint_when(text: str, now: datetime, flag: str = "--start") -> datetime:
    """A window's start or end, as `qm maint --start/--end` take it: `now`, `+2h` or `now+2h`
    (that long from now, as Slurm's starttime=now+2hours), `10:30` (today, UTC), a date or an ISO
    time (UTC unless it gives an offset). A bare `2h` is refused: in two hours, or two hours ago?"""
    value = text.strip().lower()
    ahead = value.removeprefix("now").strip()
    if ahead.startswith("+"):
        try:
            return now + timedelta(seconds=output.parse_duration(ahead[1:]))
        except ValueError:
            raise CliError(f"{flag}: '{text}' is not a time: use now, +2h (in two hours), 10:30 (today, UTC) or "
                           "2026-12-02T08:00 (UTC unless it gives an offset)") from None
    if value[:1].isdigit() and not any(c in value for c in ":-"):
        raise CliError(f"{flag}: '{text}' is a length, not a time: say +{text.strip()} for that long from now")
    try:
        return output.parse_when(text, now)
    except ValueError as exc:
        raise CliError(f"{flag}: {exc}") from None


def _utc_z(at: datetime) -> str:
    """An instant as the API takes it, with its zone: UTC with `Z` (maintenance-windows/ refuses a
    time without one; maint_when reads one typed without an offset as UTC)."""
    return at.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _maint_body(args: argparse.Namespace, now: datetime) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if args.nodes is not None:
        body["nodes"] = [n.strip() for n in args.nodes.split(",") if n.strip()]
    if args.pool is not None:
        body["pool"] = args.pool
    if args.start is not None:
        body["start_at"] = _utc_z(maint_when(args.start, now))
    if args.duration is not None:
        body["duration_s"] = _duration(args.duration, "--duration")
    if args.end is not None:
        body["end_at"] = _utc_z(maint_when(args.end, now, "--end"))
    if args.reason is not None:
        body["reason"] = args.reason
    return body


def _maint_refused(error: ApiError, args: argparse.Namespace) -> CliError | ApiError:
    if not error.errors:
        return error

    def flag(field: str) -> str:
        name = MAINT_FLAGS.get(field)
        given = getattr(args, name[2:], None) if name else None
        return f"{field} ({name} {given})" if given is not None else field

    return CliError("Invalid request." + "".join(f"\n  {flag(field)}: {' '.join(msgs)}"
                                                 for field, msgs in error.errors.items()))


def _window_times(window: dict[str, Any]) -> str:
    return (f"from {output.utc_text(window['start_at'])} to {output.utc_text(window['end_at'])} "
            f"({output.human_duration(window['duration_s'])})")


def _print_affected(window: dict[str, Any]) -> None:
    jobs = window["affected_running_jobs"]
    if window["state"] in ("ended", "cancelled"):
        return
    if window["state"] == "active":  # it has begun: whatever runs on its nodes runs inside it
        if not jobs:
            print("No job holds GPUs on its nodes now.")
            return
        print(f"{counted(len(jobs), 'running job')} hold{'s' if len(jobs) == 1 else ''} GPUs on its nodes now, "
              "inside the window, until the end of "
              f"{'its runtime limit' if len(jobs) == 1 else 'their runtime limits'} at the latest (the scheduler "
              "stops none: cancel or requeue them to free the nodes):")
    elif not jobs:
        print("No running job will still hold GPUs on its nodes when it begins.")
        return
    else:
        print(f"{counted(len(jobs), 'running job')} will still hold GPUs on its nodes when it begins, by "
              f"{'its runtime limit' if len(jobs) == 1 else 'their runtime limits'} (the scheduler stops none: drain "
              "the nodes or cancel the jobs):")
    output.table([(j["id"] if j["id"] is not None else "-", j["name"] or f"(a job of team {j['team']})", j["team"],
                   j["gpus"], ",".join(j["nodes"]), output.utc_text(j["holds_until"], suffix=""))
                  for j in jobs], ["JOB", "NAME", "TEAM", "GPUS", "NODES", "LIMIT ENDS (UTC)"])


def _print_window(window: dict[str, Any], verb: str) -> None:
    print(output.visible(f"Maintenance window {window['id']} {verb}: {_nodes_cell(window['nodes'])} "
                         f"{_window_times(window)}: {window['reason']}."))
    _print_affected(window)


def _overlaps_said(others: list[int]) -> str:
    """`overlaps window 5 on a shared node ...`: windows stored before overlaps were refused."""
    ids = ", ".join(str(o) for o in others)
    return (f"overlaps window{'s' if len(others) > 1 else ''} {ids} on a shared node (stored before overlapping "
            f"windows were refused): merge them, `qm maint edit` one and `qm maint cancel` the other")


def _window_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CliError(f"'{text}' is not a maintenance window's id: `qm maint list` shows them") from None


def cmd_maint(api: Api, args: argparse.Namespace) -> int:
    """`qm maint add|list|show|edit|cancel`: maintenance windows (maintenance-windows/)."""
    action = args.maint_action
    now = datetime.now(timezone.utc)
    if action == "list":
        params: dict[str, Any] = {"limit": 1000}
        if not args.all:
            params["state"] = ["active", "upcoming"]
        if args.node:
            params["node"] = args.node
        page = api.request("GET", "maintenance-windows/", params=params)
        if args.json:
            output.emit_json(page)
            return 0
        rows = page["results"]
        if not rows:
            print("No maintenance window " + ("at all." if args.all else "active or upcoming (--all lists the "
                                              "ended and cancelled ones too).")
                  + " Schedule one: qm maint add --nodes NODE --start +2h --duration 4h --reason '...'")
            return 0
        output.table([(w["id"], w["state"], output.utc_text(w["start_at"], suffix=""),
                       output.utc_text(w["end_at"], suffix=""), output.human_duration(w["duration_s"]),
                       _nodes_cell(w["nodes"]), len(w["affected_running_jobs"]), w["reason"]) for w in rows],
                     ["ID", "STATE", "START (UTC)", "END (UTC)", "LENGTH", "NODES", "AFFECTED JOBS", "REASON"])
        for w in rows:
            if w.get("overlapping_windows"):
                print(f"Window {w['id']} {_overlaps_said(w['overlapping_windows'])}.")
        return 0
    if action == "add":
        body = _maint_body(args, now)
        try:
            window = api.request("POST", "maintenance-windows/", body=body)
        except ApiError as error:
            raise _maint_refused(error, args) from None
        if args.json:
            output.emit_json(window)
        else:
            _print_window(window, "scheduled")
            print(f"Jobs that would still run on its nodes when it begins wait (reason MaintenanceWindow). "
                  f"Cancel it: qm maint cancel {window['id']}")
        return 0
    window_id = _window_id(args.window)
    if action == "show":
        window = api.request("GET", f"maintenance-windows/{window_id}/")
        if args.json:
            output.emit_json(window)
            return 0
        output.fields([("Window", window["id"]), ("State", window["state"]), ("Nodes", ", ".join(window["nodes"])),
                       ("Start", output.utc_text(window["start_at"])), ("End", output.utc_text(window["end_at"])),
                       ("Length", output.human_duration(window["duration_s"])), ("Reason", window["reason"]),
                       ("Created", f"{output.utc_text(window['created_at'])} by {window['created_by'] or '-'}")]
                      + ([("Cancelled", f"{output.utc_text(window['cancelled_at'])} by "
                                        f"{window['cancelled_by'] or '-'}")] if window["cancelled_at"] else [])
                      + ([("Overlaps", _overlaps_said(window["overlapping_windows"]))]
                         if window.get("overlapping_windows") else []))
        _print_affected(window)
        return 0
    if action == "edit":
        body = _maint_body(args, now)
        if not body:
            raise CliError(f"Nothing to change: give --nodes, --pool, --start, --end or --duration, or --reason "
                           f"(qm maint edit {window_id} --help).")
        try:
            window = api.request("PATCH", f"maintenance-windows/{window_id}/", body=body)
        except ApiError as error:
            raise _maint_refused(error, args) from None
        if args.json:
            output.emit_json(window)
        else:
            _print_window(window, "now")
        return 0
    window = api.request("POST", f"maintenance-windows/{window_id}/cancel/")
    if args.json:
        output.emit_json(window)
    else:
        print(output.visible(f"Maintenance window {window['id']} cancelled ({_nodes_cell(window['nodes'])} "
                             f"{_window_times(window)}: {window['reason']}): its nodes take any work again from the "
                             "next scheduling cycle."))
    return 0


# ------------------------------------------------------------------------------------ parser


def _common_options(defaults: bool) -> argparse.ArgumentParser:
    """--url and --json, taken before or after the command. The commands' copies have no
    defaults of their own (SUPPRESS), else they would overwrite what was given before the
    command (`qm --json whoami` printed a table, `qm --url … list` asked another server)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", "--server", dest="url", default=None if defaults else argparse.SUPPRESS,
                        help="server URL (default: $QM_URL, else the one you logged in to)")
    common.add_argument("--json", action="store_true", default=False if defaults else argparse.SUPPRESS,
                        help="print the API's JSON instead of a table")
    return common


def _count_or_none(text: str) -> int | str:
    """`qm update`'s --gpus-per-node, --min-gpus, --max-gpus: a number, or `none` to clear the
    job's (null in the API: the scheduler decides how many per node; a rigid job)."""
    if text.strip().lower() == "none":
        return "none"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of GPUs, nor none") from None


def _add_shape_flags(p: argparse.ArgumentParser, *, update: bool = False) -> None:
    """The job's shape, as qm submit and qm update both take it (`update`: the fields a job may
    have unset take `none` too, to clear them)."""
    count: Any = _count_or_none if update else int
    p.add_argument("--gpus", "-g", type=int)
    p.add_argument("--gpus-per-node", type=count, metavar="N|none" if update else None)
    p.add_argument("--gpu-type", action="append", help="acceptable GPU type (repeat for several)")
    p.add_argument("--min-gpu-memory", type=int, metavar="GB")
    p.add_argument("--cpus-per-gpu", type=int)
    p.add_argument("--memory-per-gpu", type=int, metavar="GB")
    p.add_argument("--topology", choices=["any", "same_node", "same_leaf", "same_spine"])
    p.add_argument("--min-gpus", type=count, metavar="N|none" if update else None)
    p.add_argument("--max-gpus", type=count, metavar="N|none" if update else None)


def build_parser() -> argparse.ArgumentParser:
    common = _common_options(defaults=False)
    parser = argparse.ArgumentParser(prog="qm", description="Quartermaster: GPU jobs from the command line.",
                                     parents=[_common_options(defaults=True)])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("login", parents=[common], help="get a token and store it")
    p.add_argument("--username", "-u")
    p.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    sub.add_parser("logout", parents=[common], help="revoke the token on the server and forget it here",
                   description="Revoke the stored token on the server it was issued by, then remove it from "
                               "the config file. A user has one token, so this logs out every qm logged in as "
                               "you (other machines, scripts) at once. If the server cannot be reached the "
                               "token is still removed here, with a warning that it stays valid there.")
    sub.add_parser("whoami", parents=[common], help="who the stored token belongs to")

    p = sub.add_parser("submit", parents=[common], help="submit a job or a job array",
                       description="Submit a job: flags, a YAML file of job fields, or both (flags win). "
                       "Anything after -- is the command.")
    p.add_argument("file", nargs="?", help="YAML file with job fields (- for standard input)")
    p.add_argument("--name", "-n")
    _add_shape_flags(p)
    p.add_argument("--time", "-t", help="runtime limit: 4h, 90m, 1d12h, 04:00:00, 1-12:00 (Slurm's D-HH:MM); "
                                        "a bare number is minutes, as sbatch's")
    p.add_argument("--priority", "-p", help="priority class")
    p.add_argument("--project")
    p.add_argument("--team")
    p.add_argument("--workload", choices=["training", "serving", "interactive", "batch"])
    p.add_argument("--checkpoint-every", metavar="DURATION")
    p.add_argument("--dependency", "-d", metavar="TYPE:JOB[:JOB],...",
                   help="start only once these jobs meet TYPE (Slurm's --dependency): after (started), afterok "
                        "(succeeded), afternotok (failed), afterany (ended); e.g. afterok:12:13,afterany:14. "
                        "JOB may be a job array's id (every task). singleton: only once no other job of yours "
                        "with this name runs or waits ahead of it (one at a time, in submission order); alone "
                        "or among others, e.g. afterok:12,singleton. Joined by ? instead of commas, any one "
                        "is enough: afterok:12?afterok:13 (not mixed with commas). With --array, "
                        "aftercorr:ARRAY_ID: each task after the task of the same index of that array succeeds")
    p.add_argument("--env", "-e", action="append", metavar="NAME=VALUE")
    p.add_argument("--array", "-a", help="job array indices: 0-99, 1,3,5, 0-98:2; 0-99%%10 runs at most 10 at a time")
    p.add_argument("--idempotency-key", help="default: a fresh key per invocation, reused on retries")
    p.add_argument("--hold", "-H", action="store_true",
                   help="submit it held: it waits out of the queue until `qm release JOB` (sbatch -H)")
    p.add_argument("--hold-reason", metavar="TEXT", help="with --hold: why it is held, in your words")
    p.add_argument("--parsable", action="store_true",
                   help="print only the job's id (an array's id), as sbatch --parsable: JOB=$(qm submit --parsable "
                        "...); qm submit -d afterok:$JOB ...")

    for name, helptext in (("list", "your team's jobs (pending and running unless --all)"),
                           ("status", "one job in detail, or the list")):
        p = sub.add_parser(name, aliases=["squeue"] if name == "list" else [], parents=[common], help=helptext)
        if name == "status":
            p.add_argument("job", nargs="?")
        p.add_argument("--state", "-t", action="append", help="only this state (repeatable)")
        p.add_argument("--all", action="store_true", help="include finished jobs")
        p.add_argument("--team")
        p.add_argument("--mine", action="store_true", help="only jobs you submitted")
        p.add_argument("--user", "-u", help="only jobs this user submitted (as squeue -u)")
        p.add_argument("--name", "-n", help="only jobs whose name contains this (as squeue -n, any case)")
        p.add_argument("--project", help="only jobs of this project")
        p.add_argument("--priority", "-p", metavar="CLASS", help="only jobs of this priority class")
        p.add_argument("--reason", metavar="CODE",
                       help="only waiting jobs with this reason, e.g. QuotaExceeded, WaitingForDependency, Held")
        p.add_argument("--array", metavar="ARRAY_ID", help="only the tasks of this job array")
        p.add_argument("--node", help="only the jobs holding GPUs on this node now (as squeue -w)")
        p.add_argument("--sort", metavar="FIELD[,FIELD]",
                       help="id, submitted_at, gpus, queue_position, priority, name, state, started_at, "
                            "finished_at or elapsed; -FIELD descends (default: newest first)")
        p.add_argument("--limit", type=int, default=50, help="jobs per page, at most 1000 (default 50)")
        p.add_argument("--offset", type=int, default=0, help="skip this many jobs (the next page)")

    p = sub.add_parser("explain", parents=[common], help="why a job waits, and what would start it")
    p.add_argument("job")
    p = sub.add_parser("events", parents=[common], help="a job's history; --follow to watch it",
                       description="Every state change of a job, oldest first, with who made it and why "
                                   "(submitted, bound, started, preempted and by whom, requeued, cancelled, "
                                   "finished). With --follow, new events are printed as they happen until the "
                                   "job has finished. --json: a JSON list (with --follow, one JSON object a line).")
    p.add_argument("job")
    p.add_argument("--follow", "-f", action="store_true", help="keep watching until the job has finished")
    p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS", help="how often --follow asks (default 2)")
    p = sub.add_parser("runs", parents=[common], help="a job's runs: each bind, how it ended, GPU-hours, cost, "
                                                      "work lost",
                       description="Every run of a job, oldest first (as sacct --duplicates): when each was bound, "
                                   "started and ended, how it ended (preempted and requeued, fenced off a node, "
                                   "requeued, succeeded, failed ...) and why, its GPUs and nodes, the GPU-hours it "
                                   "held, what it cost (as showback charges it), whether on borrowed quota, and "
                                   "the work its requeue lost. --limit N: its latest N runs only. --json: the "
                                   "API's list.")
    p.add_argument("job")
    p.add_argument("--limit", type=_latest_count, default=None, metavar="N",
                   help="only the latest N runs (still oldest first); default: all of them")
    p = sub.add_parser("logs", parents=[common], help="a job's output (stdout and stderr); -f to follow it",
                       description="A job's output as its processes wrote it (stdout and stderr together), "
                                   "rank 0 of its latest run unless told otherwise. The last 8 MiB of each rank "
                                   "are kept. With --follow, new output is printed as it arrives (every few "
                                   "seconds: it comes with the node's heartbeats) until the job has ended; a "
                                   "requeued job's next run is followed too. --json: the API's replies, one a line.")
    p.add_argument("job")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--rank", type=int, metavar="N", help="this process's output (its RANK; default 0)")
    which.add_argument("--all-ranks", action="store_true", help="every rank's, each line marked [rank N]")
    p.add_argument("--generation", type=int, metavar="G", help="this run (default: the latest; qm events lists them)")
    p.add_argument("--tail", type=int, metavar="N", help="only the last N lines (each rank's)")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new output until the job has ended")
    p.add_argument("--interval", type=float, default=2.0, metavar="SECONDS", help="how often --follow asks (default 2)")
    p = sub.add_parser("cancel", aliases=["scancel"], parents=[common],
                       help="cancel jobs, or every task of an array",
                       description="Cancel jobs: a pending job at once, a running one is told to stop (its "
                                   "processes get the class's grace period). Every id is checked first. "
                                   "--array cancels every task of an array still pending or running.")
    p.add_argument("jobs", nargs="*", metavar="JOB")
    p.add_argument("--array", metavar="ARRAY_ID", help="every pending or running task of this job array")
    p.add_argument("--name", "-n", help="instead of ids: your jobs of this name, the whole name (scancel -n)")
    p.add_argument("--state", "-t", action="append", metavar="|".join(CANCELLABLE_STATES),
                   help="instead of ids: your jobs in this state (repeatable; scancel -t); with --name, of both")
    p.add_argument("--user", "-u", help="with --name or --state: this user's jobs instead of yours (scancel -u); "
                                        "alone: all of that user's waiting and running jobs")
    for verb, helptext, description in (
        ("hold", "keep waiting jobs out of the queue until released",
         "Hold waiting jobs (scontrol hold): they stay pending, out of the queue, holding nothing, until "
         "released. An admin's hold is released only by an admin. A running job cannot be held: cancel it, "
         "or requeue it held (qm requeue --hold JOB)."),
        ("release", "put held jobs back in the queue",
         "Release held jobs (scontrol release): back in the queue from the next scheduling cycle."),
    ):
        p = sub.add_parser(verb, parents=[common], help=helptext, description=description)
        p.add_argument("jobs", nargs="*", metavar="JOB")
        p.add_argument("--array", metavar="ARRAY_ID", help="every waiting task of this job array")
        if verb == "hold":
            p.add_argument("--reason", "-r", metavar="TEXT",
                           help="why, in your words (one line, at most 200 characters), e.g. "
                                "'waiting for dataset v3': its explanation and events say it")
    p = sub.add_parser("requeue", parents=[common], help="put running or ended jobs back in the queue",
                       description="Requeue jobs (scontrol requeue): a running job is told to stop (its processes "
                                   "get its class's grace period, as for a preemption), then waits again with the "
                                   "same id and restarts from its last checkpoint, the work since then counted as "
                                   "lost. An ended job (succeeded, failed, cancelled, timed out) waits again at once "
                                   "with the same id, its earlier runs kept; it is refused while it still holds GPUs, "
                                   "when a dependency of it can never be met, or when it would no longer be accepted "
                                   "as a submit (the field named). --hold: it comes back held until `qm release` "
                                   "(scontrol requeuehold). A waiting or stopping job is refused. With qm cordon NODE "
                                   "first, it runs elsewhere.")
    p.add_argument("jobs", nargs="*", metavar="JOB")
    p.add_argument("--array", metavar="ARRAY_ID", help="every running task of this job array")
    p.add_argument("--states", metavar="STATE,...",
                   help="with --array: requeue the tasks in these states instead of the running ones, among "
                        "running, succeeded, failed, cancelled, timed_out (e.g. failed,timed_out: rerun a sweep's "
                        "failed tasks, its running ones left alone)")
    p.add_argument("--hold", "-H", dest="requeue_hold", action="store_true",
                   help="come back held: out of the queue until `qm release JOB`")
    p.add_argument("--reason", "-r", metavar="TEXT",
                   help="why, in your words (one line, at most 200 characters), e.g. 'gpu-07 throws XID 79': its "
                        "reason and events say 'Requeued by you: ...'")
    p = sub.add_parser("update", parents=[common], help="change a waiting job (or a running one's name and limit)",
                       description="Change a job (scontrol update), with qm submit's flags. While it waits: its "
                                   "name, project, priority, limits and shape, checked as a submit of the changed "
                                   "job would be. Once it runs: only --name, and --time lowered (admins may raise "
                                   "it). Prints each change, old -> new.")
    p.add_argument("job")
    p.add_argument("--name", "-n")
    _add_shape_flags(p, update=True)
    p.add_argument("--time", "--time-limit", "-t", dest="time",
                   help="runtime limit: 4h, 90m, 1d12h, 04:00:00, 1-12:00 (Slurm's D-HH:MM); a bare number is minutes, "
                        "as sbatch's")
    p.add_argument("--priority", "-p", help="priority class")
    p.add_argument("--project")
    p.add_argument("--no-project", action="store_true", help="take the job out of its project")
    p.add_argument("--checkpoint-every", metavar="DURATION")
    p.add_argument("--dependency", "-d", metavar="TYPE:JOB[:JOB],...|none|+=...|-=...",
                   help="replace the job's dependencies (scontrol update dependency=), as qm submit -d takes "
                        "them: e.g. afterok:12:13,afterany:14, singleton, or any one of: afterok:12?afterok:13; "
                        "none removes them all. +=LIST adds "
                        "to them, -=LIST removes from them (scontrol's dependency+= and -=): -d +=afterok:5, "
                        "-d -=afterany:7, -d +=singleton; removing one it does not have is refused. Only while "
                        "it waits")
    p.add_argument("--array-limit", metavar="N|none",
                   help="with a job array's id (or one of its tasks' job id) and no other flag: at most N of its "
                        "tasks run at a time, set on every task (scontrol update ArrayTaskThrottle=N, as "
                        "qm submit --array 0-99%%N); none lifts the limit")

    p = sub.add_parser(
        "history", aliases=["sacct"], parents=[common], help="jobs that ended: how, how long, GPU-hours (as sacct)",
        description="The jobs that ended (succeeded, failed, cancelled, timed out) in a window, oldest end first "
                    "(the CSV newest end first, as the history page and the API give it), "
                    "as sacct lists them: state and exit code, start, the last run's elapsed time, GPUs, the "
                    "GPU-hours each held over all its runs (the accounting's allocated GPU-hours), those its "
                    "preemptions and requeues threw away, the nodes it ran on; then the totals. The window is "
                    "[--since, --until): by default from 00:00 UTC today (sacct's default) to now. Times: 2h, 90m, "
                    "3d (that long ago), today, yesterday, now, 10:30 (today, UTC), 2026-11-29, "
                    "2026-11-29T10:00 (UTC unless it gives an offset).")
    p.add_argument("--since", "-S", metavar="WHEN", help="ended at or after (default: 00:00 UTC today)")
    p.add_argument("--until", "-E", metavar="WHEN", help="ended before (default: now)")
    p.add_argument("--state", "-s", action="append", choices=ENDED_STATES,
                   help="only jobs that ended so (repeatable; default: every way of ending)")
    p.add_argument("--user", "-u", help="only this user's jobs")
    p.add_argument("--team", help="only this team's jobs")
    p.add_argument("--node", help="only jobs that ran on this node (in any run), as sacct --nodelist")
    p.add_argument("--name", help="only jobs whose name contains this")
    p.add_argument("--exit-code", type=int, help="only jobs that ended with this exit code")
    p.add_argument("--format", choices=["table", "csv", "json"], default="table",
                   help="table (default), csv (the server's, as the history page's Download CSV and GET "
                        "jobs/history.csv give it: newest end first, every figure in full, a TOTAL row) or "
                        "json (the API's jobs and the totals)")

    p = sub.add_parser("showback", parents=[common], help="cost and utilization by team, project, job or class")
    p.add_argument("--by", default="team", choices=["team", "project", "job", "priority_class"])
    when = p.add_mutually_exclusive_group()
    when.add_argument("--window", default="7d", help="7d, 24h, 2w, or start,end (default 7d)")
    when.add_argument("--month", help="a calendar month: 2026-11")
    p.add_argument("--csv", action="store_true", help="finance's CSV, with a TOTAL row")

    sub.add_parser("config", parents=[common], help="the scheduling policy in force and the loop's timings",
                   description="As Slurm's scontrol show config: every setting of the scheduling engine as the "
                               "loop runs it (queue order, placement per workload, preemption, backfill, fair "
                               "share half-life, aging, per-cycle caps), the loop's timings and the leader now. "
                               "--json: GET /api/v1/scheduler/policy/.")
    p = sub.add_parser("sinfo", parents=[common], help="the fleet per pool: nodes, GPUs held and free, "
                                                       "fragmentation; the queue's depth",
                       description="As Slurm's sinfo: per pool its GPU type, nodes (whole free, partly used), "
                                   "GPUs (held, free on ready nodes, away on nodes that take no work), the largest "
                                   "free block on one node and the GPUs stranded by fragmentation; then how many "
                                   "jobs wait, for how many GPUs and why, and how many run. --json: the API's "
                                   "metrics/fragmentation/ and metrics/queue/.")

    p = sub.add_parser("sprio", parents=[common], help="waiting jobs in queue order, with what places each there",
                       description="As Slurm's sprio: the waiting jobs you may see in the order the next cycle "
                                   "tries them, each with its priority (its class's value plus the points "
                                   "waiting added), its team's dominant share (fair share: among equal "
                                   "priorities the lower goes first) and its runtime limit. Held jobs and jobs "
                                   "waiting for a dependency are not in line. --json: the API's answer "
                                   "(GET /api/v1/jobs/priority/).")
    p.add_argument("jobs", nargs="*", metavar="JOB", help="only these jobs (as sprio -j)")

    sub.add_parser("sshare", parents=[common], help="every team's fair share, lowest first",
                   description="As Slurm's sshare: per team its dominant share (DRF: the largest of its GPU, "
                               "CPU and memory shares, each what it holds now plus its past usage decayed "
                               "by the half-life, over the fleet's capacity), which resource that is, the "
                               "GPUs it holds now and its decayed GPU-hours. Lowest first: among jobs of "
                               "equal priority the lower share goes first. --json: the API's answer "
                               "(GET /api/v1/scheduler/fair-share/).")

    p = sub.add_parser("quotas", parents=[common], help="your team's quotas and what it holds now",
                       description="Quota per team and GPU type: the nominal guarantee, how many more it may "
                                   "borrow from its cohort and lend to it, the GPUs its running jobs hold now "
                                   "and how many of those are borrowed (beyond the nominal, reclaimable by "
                                   "preemption). Members see their team's; admins and finance every team's.")
    p.add_argument("--team", help="only this team's quotas")

    p = sub.add_parser("nodes", parents=[common], help="the fleet's nodes; qm nodes retire|return NODE (admins)",
                       description="The fleet's nodes (retired ones with --retired, or --all for both). With an action and a node "
                                   "(admins): cordon, drain, uncordon, retire (out of the fleet for good; refused "
                                   "while jobs run there: drain it first) or return (a retired node back to "
                                   "service: down until its agent registers, then cordoned).")
    p.add_argument("action", nargs="?", metavar="ACTION", help="cordon, drain, uncordon, retire or return")
    p.add_argument("node", nargs="?", metavar="NODE")
    p.add_argument("--all", action="store_true", help="list retired nodes too")
    p.add_argument("--retired", action="store_true", help="list only the retired nodes")
    p.add_argument("--reason", help="with cordon or drain: why (Slurm's Reason=), listed by qm nodes")
    for action, helptext in (("cordon", "take no new work"), ("drain", "take no new work, let jobs finish"),
                             ("uncordon", "take work again")):
        p = sub.add_parser(action, parents=[common], help=f"{helptext} (admins)")
        p.add_argument("node")
        if action != "uncordon":
            p.add_argument("--reason", help="why (Slurm's Reason=): in the node's events, listed by qm nodes")

    p = sub.add_parser("notify", parents=[common], help="webhooks for your jobs' events (Slack, ...)",
                       description="Tell a URL when your jobs start, end, fail, are preempted or requeued, or can "
                                   "never run (Slurm's --mail-type, by webhook): an HTTP POST of JSON whose "
                                   "`text` a Slack incoming webhook shows as is, signed with the hook's secret "
                                   "(X-Quartermaster-Signature: sha256=HMAC). Deliveries are retried for about "
                                   "3 hours while the receiver is down.")
    actions = p.add_subparsers(dest="notify_action", required=True, metavar="ACTION")
    q = actions.add_parser("add", parents=[common], help="subscribe a URL")
    q.add_argument("hook_url", metavar="URL")  # not `url`: that is --url, the server's
    q.add_argument("--events", "-e", default="started,succeeded,failed,timed_out,cancelled,preempted",
                   help=f"comma-separated: {', '.join(NOTIFY_EVENTS)}; or Slurm's begin, end, fail, requeue, all "
                        "(default: all but requeued and unschedulable)")
    q.add_argument("--team", help="every job of this team of yours (default: the jobs you submit)")
    q.add_argument("--secret", help="the signature's key (default: a random one, printed once)")
    actions.add_parser("list", parents=[common], help="your hooks and how their deliveries go")
    for action, helptext in (("rm", "remove a hook"), ("test", "send a test notification now"),
                             ("rotate", "replace a hook's signing secret with a new random one, printed once"),
                             ("history", "a hook's changes, newest first: who created or changed it, when, what")):
        q = actions.add_parser(action, parents=[common], help=helptext)
        q.add_argument("hook", metavar="ID")
    q = actions.add_parser("edit", parents=[common], help="change a hook's URL, events, team or pause it",
                           description="Change a hook in place: only what you give changes. A new URL is checked "
                                       "as when adding (https, or http to an allowed internal network).")
    q.add_argument("hook", metavar="ID")
    q.add_argument("--hook-url", dest="new_url", metavar="URL",  # not --url: that is the server's
                   help="the hook's new URL")
    q.add_argument("--events", "-e", help=f"the new events, replacing the old: {', '.join(NOTIFY_EVENTS)}; or "
                                          "Slurm's begin, end, fail, requeue, all")
    scope = q.add_mutually_exclusive_group()
    scope.add_argument("--team", help="follow every job of this team of yours")
    scope.add_argument("--own-jobs", action="store_true", help="follow only the jobs you submit (no team)")
    pause = q.add_mutually_exclusive_group()
    pause.add_argument("--pause", dest="active", action="store_false", default=None, help="send nothing until resumed")
    pause.add_argument("--resume", dest="active", action="store_true", help="send again")

    p = sub.add_parser("maint", parents=[common], help="maintenance windows: nodes out of service for a time",
                       description="Maintenance windows (Slurm's maintenance reservations): nodes taken out of "
                                   "service from a start to an end. The scheduler starts a job on them only if its "
                                   "run (start to runtime limit) ends before the window begins, so they are empty "
                                   "then; jobs that could only run there wait with the reason MaintenanceWindow. "
                                   "Running jobs are not stopped: add, edit and show list those that will still "
                                   "hold GPUs when it begins. Everyone lists and shows; admins add, edit, cancel.")
    actions = p.add_subparsers(dest="maint_action", required=True, metavar="ACTION")
    for action, helptext in (("add", "schedule a window (admins)"),
                             ("edit", "move a window, change its nodes or reason (admins)")):
        q = actions.add_parser(action, parents=[common], help=helptext)
        if action == "edit":
            q.add_argument("window", metavar="ID")
        q.add_argument("--nodes", "-w", metavar="N1,N2", help="node names, comma-separated (on edit: they replace "
                                                             "the window's nodes)")
        q.add_argument("--pool", help="every node of this pool (as it is now)")
        q.add_argument("--start", "-s", metavar="WHEN", help="now, +2h (in two hours), 10:30 (today, UTC), "
                                                            "2026-12-02T08:00 (UTC unless it gives an offset); on "
                                                            "edit, a new start alone moves the window whole")
        q.add_argument("--duration", "-d", metavar="LENGTH", help="4h, 90m, 1d12h, 04:00:00 (or --end)")
        q.add_argument("--end", "-e", metavar="WHEN", help="when it ends (or --duration)")
        q.add_argument("--reason", "-r", metavar="TEXT", help="what the maintenance is, e.g. 'firmware upgrade'")
    q = actions.add_parser("list", parents=[common], help="active and upcoming windows (--all: every one)")
    q.add_argument("--all", action="store_true", help="ended and cancelled windows too")
    q.add_argument("--node", help="only the windows that take this node out")
    for action, helptext in (("show", "one window and the running jobs it affects"),
                             ("cancel", "cancel a window: its nodes take any work again (admins)")):
        q = actions.add_parser(action, parents=[common], help=helptext)
        q.add_argument("window", metavar="ID")
    return parser


COMMANDS = {
    "login": cmd_login, "logout": cmd_logout, "whoami": cmd_whoami, "list": cmd_list, "squeue": cmd_list, "status": cmd_status,
    "explain": cmd_explain, "events": cmd_events, "runs": cmd_runs, "logs": cmd_logs, "cancel": cmd_cancel, "scancel": cmd_cancel, "requeue": cmd_requeue, "hold": cmd_hold, "release": cmd_hold, "update": cmd_update, "showback": cmd_showback, "quotas": cmd_quotas, "sprio": cmd_sprio, "sshare": cmd_sshare, "sinfo": cmd_sinfo, "config": cmd_config, "nodes": cmd_nodes,
    "cordon": cmd_node_action, "drain": cmd_node_action, "uncordon": cmd_node_action,
    "history": cmd_history, "sacct": cmd_history, "notify": cmd_notify, "maint": cmd_maint,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, command = argv[:at], argv[at + 1:]
    # `--sort -gpus`: argparse takes a value that starts with '-' for an option of its own.
    for i, word in enumerate(argv[:-1]):
        if word == "--sort" and argv[i + 1].startswith("-") and argv[i + 1][1:2].isalpha():
            argv[i:i + 2] = [f"--sort={argv[i + 1]}"]
            break
    # `qm update -d -=afterany:7` (scontrol's dependency-=): the same for a dependency removed.
    for i, word in enumerate(argv[:-1]):
        if word in ("-d", "--dependency") and re.match(r"-=?(after|singleton)", argv[i + 1]):
            argv[i:i + 2] = [f"--dependency={argv[i + 1]}"]
            break
    args = build_parser().parse_args(argv)
    try:
        try:
            api = Api.from_environment(args.url)
        except CliError:
            if args.command != "logout":
                raise
            # An unreadable config file: logout removes it (its token cannot be revoked).
            api = Api(server_url(args.url or os.environ.get("QM_URL") or DEFAULT_URL), None)
        if args.command == "submit":
            return cmd_submit(api, args, command)
        if command:
            raise CliError(f"`qm {args.command}` takes no command after --")
        return COMMANDS[args.command](api, args)
    except CliError as error:
        # Line by line: the field errors' own lines stay lines, any other control character is escaped.
        print("error: " + "\n".join(output.visible(line) for line in str(error).split("\n")), file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader stopped early (`qm list | head`): nothing left to say. Point stdout at
        # /dev/null so the interpreter's last flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
