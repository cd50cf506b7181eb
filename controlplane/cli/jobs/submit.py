"""`qm submit`: a job, or a job array, sent once under an idempotency key, and what was submitted
said in one line (`--parsable`: the id alone; `--json`: the API's answer)."""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from controlplane.cli import output
from controlplane.cli.client import Api, ApiError, UsageError
from controlplane.cli.jobs.dependencies import runs_after
from controlplane.cli.jobs.specs import spec_from_args
from controlplane.services.span_text import span_words
from scheduler_core.sentences import counted

#: The API's fields (jobs/, PATCH jobs/{id}/) spelled otherwise than the flags of `qm submit` and
#: `qm update` that set them, as client.refusal names them. The others are named as fields: a
#: YAML file gives them so too.
SUBMIT_FLAGS = {"runtime_limit_s": "time", "priority_class": "priority", "checkpoint_interval_s": "checkpoint_every",
                "min_gpu_memory_gb": "min_gpu_memory", "memory_gb_per_gpu": "memory_per_gpu", "gpu_types": "gpu_type",
                "dependencies": "dependency", "array_task_limit": "array_limit", "command": "wrap",
                "members_on_distinct_nodes": "distinct_nodes"}


def cmd_submit(api: Api, args: argparse.Namespace, command: list[str]) -> int:
    """Submit a job, or a job array (`--array`), once under an idempotency key (retried on a
    lost answer), and say what was submitted."""
    if args.parsable and args.json:
        raise UsageError("give --json (the API's answer) or --parsable (the id alone), not both")
    spec = spec_from_args(args, command)
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
        _say_array(result, spec, key, replayed)
    else:
        _say_job(result, key, replayed)
    return 0


def _say_array(result: dict[str, Any], spec: dict[str, Any], key: str, replayed: bool) -> None:
    """The array submitted, in one line; or, its key used before, what that submit returned."""
    what = (f"array {result['array_id']}: {result['count']} tasks of {counted(spec['gpus'], 'GPU')}, "
            f"{array_span(result['job_ids'])} (team {result['team']})" + _array_limit_words(result))
    if replayed:
        output.note(f"Idempotency key {key} was already used: no new tasks were submitted. "
                             f"It returned {what}, now {_array_states(result)}.")
    else:
        output.note(f"Submitted {what}.")


def _say_job(result: dict[str, Any], key: str, replayed: bool) -> None:
    """The job submitted, in one line; or, its key used before, what that submit returned."""
    what = (f"job {result['id']} ({result['name']}): {counted(result['gpus'], 'GPU')}, "
            f"priority {result['priority_class']}, team {result['team']}, "
            f"limit {span_words(result['runtime_limit_s']) if result.get('runtime_limit_s') else 'none'}, "
            f"{result['state']}"
            + (f" and held: `qm release {result['id']}` to queue it" if result.get("hold") else "")
            + (f", runs after {runs_after(result)}" if result.get("dependencies") or result.get("singleton") else ""))
    if replayed:
        output.note(f"Idempotency key {key} was already used: no new job was submitted. "
                             f"It returned {what}.")
    else:
        output.note(f"Submitted {what}.")


def array_span(ids: list[int]) -> str:
    """`jobs 413–512`, only when they are: the tasks of one array need not have consecutive ids
    (concurrent submits take ids from the same sequence meanwhile)."""
    low, high = min(ids), max(ids)
    if high - low + 1 == len(ids):
        return f"jobs {low}–{high}"
    return f"jobs {low} to {high}, not all consecutive"


def _array_limit_words(record: dict[str, Any]) -> str:
    """`, at most 10 at a time` for an array (or a task) with a task limit (Slurm's `%10`); ""."""
    limit = record.get("array_task_limit")
    return f", at most {limit} at a time" if limit else ""


def _array_states(summary: dict[str, Any]) -> str:
    """`3 running, 1 stopping: cancelled`: an array's tasks by state_label (a stopping task by
    why it stops), as a replay reads them now; by state from a server that does not say labels."""
    states = summary.get("state_labels") or summary.get("states") or {}
    return ", ".join(f"{n} {state}" for state, n in sorted(states.items(), key=lambda kv: (-kv[1], kv[0]))) or "no tasks"
