"""A job from its submit to its output: `qm submit` (flags, a YAML file, dependencies, arrays),
`qm list` (`squeue`), `qm status`, `qm explain`, `qm cancel` (`scancel`), `qm hold`, `qm release`,
`qm requeue`, `qm update`, `qm events`, `qm runs`, `qm logs`."""

from __future__ import annotations

import argparse
import contextlib
import re
import shlex
import signal
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from controlplane.cli import account, arguments, output
from controlplane.cli.client import Api, ApiError, CliError, refusal
from controlplane.services import dependency_text
from scheduler_core.sentences import counted, gang_roles, gpu_hours

ACTIVE_STATES = ["pending", "running", "preempting"]
# YAML keys and flags that are spelled differently from the API's fields.
YAML_ALIASES = {"time": "runtime_limit_s", "priority": "priority_class", "checkpoint_every": "checkpoint_interval_s"}


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
        raise CliError(f"{path} is not valid YAML: {_yaml_problem(exc)}") from exc
    if not isinstance(data, dict):
        raise CliError(f"{path} must be a mapping of job fields (name, gpus, ...), got {type(data).__name__}")
    spec: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        field = YAML_ALIASES.get(name, name)
        if name == "time" and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # `time: 30` as `--time 30`: minutes (`runtime_limit_s: 30` is seconds)
        if field in ("runtime_limit_s", "checkpoint_interval_s") and isinstance(value, str):
            value = arguments.duration(value, str(key), arguments.TIME_BARE_UNIT if name == "time" else 1)
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


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """Where a YAML file is wrong and how, in one line: `line 2, column 1: expected ',' or ']', but
    got '<stream end>' (in the flow sequence from line 1, column 7)`. Its first line alone said
    only what the parser was doing ("while parsing a flow sequence"), neither where nor what."""
    problem = getattr(exc, "problem", None)
    if not problem:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    mark, context, context_mark = (getattr(exc, name, None) for name in ("problem_mark", "context", "context_mark"))
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    started = ""
    if context and context_mark is not None and context.startswith("while "):
        started = (f" ({context.split(' ', 2)[-1]} from line {context_mark.line + 1}, column "
                   f"{context_mark.column + 1})")
    return f"{where}{problem}{started}"


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
        spec["runtime_limit_s"] = arguments.duration(args.time, "--time", arguments.TIME_BARE_UNIT)
    if args.hold:
        spec["hold"] = True  # sbatch -H: submitted held, out of the queue until `qm release`
    if args.hold_reason is not None:
        if not spec.get("hold"):  # the API's refusal says `send "hold": true`, its own words
            raise CliError(f"Invalid request.\n  hold_reason (--hold-reason {args.hold_reason}): a reason is for a job "
                           "submitted held: add --hold (sbatch -H), or leave the reason out")
        spec["hold_reason"] = args.hold_reason
    if args.checkpoint_every:
        spec["checkpoint_interval_s"] = arguments.duration(args.checkpoint_every, "--checkpoint-every")
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


#: The API's fields (jobs/, PATCH jobs/{id}/) spelled otherwise than the flags of `qm submit` and
#: `qm update` that set them, as client.refusal names them. The others are named as fields: a
#: YAML file gives them so too.
SUBMIT_FLAGS = {"runtime_limit_s": "time", "priority_class": "priority", "checkpoint_interval_s": "checkpoint_every",
                "min_gpu_memory_gb": "min_gpu_memory", "memory_gb_per_gpu": "memory_per_gpu", "gpu_types": "gpu_type",
                "dependencies": "dependency", "array_task_limit": "array_limit"}


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
        raise  # main names the flags (SUBMIT_FLAGS)
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


#: `qm list`'s (and `qm status`'s) API filters → its flags, as client.refusal names them.
LIST_FLAGS = {"state": "state", "team": "team", "node": "node", "ordering": "sort", "array_id": "array", "user": "user",
              "name": "name", "project": "project", "priority_class": "priority", "pending_code": "reason",
              "limit": "limit", "offset": "offset"}


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
        params["user"] = account.my_username(api)
    return params


def _elastic(job: dict[str, Any]) -> str:
    """`elastic 4–16` for an elastic job, else empty."""
    if not (job.get("min_gpus") or job.get("max_gpus")):
        return ""
    return f"elastic {job['min_gpus'] or job['gpus']}–{job['max_gpus'] or job['gpus']}"


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
    page = api.request("GET", "jobs/", params=_list_params(args, api))
    if args.json:
        output.emit_json(page)
        return 0
    rows = [
        (j["id"], j["name"], j["team"], output.job_state(j), _gpus_cell(j), j["priority_class"], output.age(j["submitted_at"]),
         j["queue_position"], _start_cell(j), j["pending_code"] if j["state"] == "pending" else "")
        for j in page["results"]
    ]
    if not rows:
        if page["count"] == 0 and not args.offset and account.reads_no_jobs(api):
            print("Finance accounts see no jobs: jobs belong to teams. `qm showback` shows what they cost.")
            return 0
        if page["count"] and args.offset:
            # Past the last page: it said "No jobs pending or running" of a list that had some.
            last = max(0, page["count"] - min(args.limit, 1000))  # the API's largest page
            print(f"No jobs from --offset {args.offset}: the list has {counted(page['count'], 'job')} "
                  f"(--offset {last} for the last page).")
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


def cmd_status(api: Api, args: argparse.Namespace) -> int:
    if not args.job:
        return cmd_list(api, args)
    job = api.request("GET", f"jobs/{arguments.job_id(args.job)}/")
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
        preemptions += f", {gpu_hours((job.get('lost_gpu_seconds') or 0) / 3600)} GPU-hours of work lost"
    output.fields([
        ("job", f"{job['id']} {job['name']}"), ("state", output.job_state(job)), ("team", job["team"]),
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
        ("gpu-hours", f"{gpu_hours(job['gpu_hours'])} held over all its runs (the accounting's)"
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
    e = api.request("GET", f"jobs/{arguments.job_id(args.job)}/explain/")
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
    params: dict[str, Any] = {"state": states, "user": user or account.my_username(api), "limit": 1000, "ordering": "id"}
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
    ids = [arguments.job_id(job) for job in args.jobs]
    body = _action_body(args)
    failed, results = 0, []
    for job_id in ids:
        try:
            result = api.request("POST", f"jobs/{job_id}/{verb}/", body=body)
        except ApiError as error:
            # Line by line, as main prints an error: a 400's fields each on a line of their own.
            said = "\n".join(output.visible(line) for line in str(refusal(error, args, ACTION_FLAGS)).split("\n"))
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


#: The fields `qm cancel`, `hold`, `release` and `requeue` send (the action's body, cancel's
#: filters of jobs/) → their flags, as client.refusal names them.
ACTION_FLAGS = {"reason": "reason", "states": "states", "state": "state", "name": "name", "user": "user"}


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
        body["runtime_limit_s"] = arguments.duration(args.time, "--time", arguments.TIME_BARE_UNIT)
    if args.checkpoint_every:
        body["checkpoint_interval_s"] = arguments.duration(args.checkpoint_every, "--checkpoint-every")
    if args.dependency is not None:
        body["dependencies"] = update_dependency(args.dependency)  # the whole new list (`none`: []), or +=/-=
        if isinstance(body["dependencies"], dependency_text.AnyOf):
            body["dependency_mode"] = "any"  # afterok:12?afterok:13: any one of them
    if not body:
        raise CliError("name what to change: --gpus, --time, --priority, --name, --project, --gpu-type, "
                       "--dependency, ... (qm update --help)")
    return _patch_and_say(api, args, f"jobs/{arguments.job_id(args.job)}/", body)


def _patch_and_say(api: Api, args: argparse.Namespace, path: str, body: dict[str, Any]) -> int:
    """PATCH ``path`` and print the server's sentence (or its JSON)."""
    answer = api.request("PATCH", path, body=body)  # a 400: main names the flags (SUBMIT_FLAGS)
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
        task = api.request("GET", f"jobs/{arguments.job_id(args.job)}/")  # one of its tasks: its array
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
    job_id = arguments.job_id(args.job)
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
        gpu_hours(run["gpu_hours"], cell=True), f"${run['cost_usd']:,.2f}", "borrowed" if run["borrowed"] else "own",
        "" if run["lost_gpu_hours"] is None else gpu_hours(run["lost_gpu_hours"], cell=True),
    ]


def cmd_runs(api: Api, args: argparse.Namespace) -> int:
    """A job's runs, oldest first, as `sacct --duplicates` lists a requeued job's: one per bind
    (preempted and requeued, stopped to resize, fenced, requeued after it ended, its last run),
    with when each was bound, started and ended, how it ended and why, where, the GPU-hours it
    held, what it cost (as showback charges it), its quota (own or borrowed) and the work its
    requeue lost; then the stops' notices and the totals. --limit N: its latest N runs."""
    job_id = arguments.job_id(args.job)
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
    print(f"{which}, {requeued} ended in a requeue; {gpu_hours(held)} GPU-hours held, costing ${cost:,.2f}; "
          f"{gpu_hours(lost)} GPU-hours of work lost.")
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


#: `qm logs`'s API parameters → its flags, as client.refusal names them.
LOGS_FLAGS = {"rank": "rank", "generation": "generation", "tail_lines": "tail"}


def _read_logs(api: Api, job_id: int, params: dict[str, Any]) -> dict[str, Any]:
    return api.request("GET", f"jobs/{job_id}/logs/", params={k: v for k, v in params.items() if v is not None})


def cmd_logs(api: Api, args: argparse.Namespace) -> int:
    """A job's output (stdout and stderr), as its agents shipped it: rank 0 of its latest run by
    default. --follow keeps printing what comes until the job has ended (Ctrl-C stops it). What
    qm says about the output (pruned bytes, a new run) goes to standard error, so standard
    output holds the job's own bytes only."""
    job_id = arguments.job_id(args.job)
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
