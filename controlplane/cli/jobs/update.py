"""`qm update` (`scontrol update`): a job's fields, its dependencies (the whole list or an edit of
it), or a job array's task limit."""

from __future__ import annotations

import argparse
import uuid
from typing import Any

from controlplane.cli import arguments, output
from controlplane.cli.client import Api, CliError, UsageError
from controlplane.cli.jobs.dependencies import update_dependency
from controlplane.services import dependency_text

#: `qm update` flags → the API's fields (PATCH jobs/{id}/), as `qm submit` spells them.
UPDATE_FLAGS = {"name": "name", "gpus": "gpus", "gpus_per_node": "gpus_per_node",
                "min_gpu_memory": "min_gpu_memory_gb", "cpus_per_gpu": "cpus_per_gpu",
                "memory_per_gpu": "memory_gb_per_gpu", "topology": "topology",
                "distinct_nodes": "members_on_distinct_nodes", "min_gpus": "min_gpus",
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
            raise UsageError("give --project NAME or --no-project, not both")
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
        raise UsageError("name what to change: --gpus, --time, --priority, --name, --project, --gpu-type, "
                       "--dependency, ... (qm update --help)")
    whole = f"qm update {args.job.strip()} --array-limit N changes the whole array, other changes are a task's; "
    return _patch_and_say(api, args, f"jobs/{arguments.job_id(args.job, array_use=whole)}/", body)


def _patch_and_say(api: Api, args: argparse.Namespace, path: str, body: dict[str, Any]) -> int:
    """PATCH ``path`` and print the server's sentence (or its JSON)."""
    answer = api.request("PATCH", path, body=body)  # a 400: main names the flags (SUBMIT_FLAGS)
    output.say_answer(answer, args.json)
    return 0


def _update_array_limit(api: Api, args: argparse.Namespace, body: dict[str, Any]) -> int:
    """`qm update ARRAY_ID --array-limit N` (or a task's job id; `none` lifts it): the array's
    task limit, every task at once (`scontrol update jobid=ARRAY ArrayTaskThrottle=N`)."""
    others = [flag for flag in ("time", "checkpoint_every", "dependency", "gpu_type") if getattr(args, flag)]
    if body or others or args.no_project:
        raise UsageError("--array-limit changes a whole array: give it alone (qm update ARRAY_ID --array-limit 4), "
                       "and change its tasks one by one with the other flags")
    text = args.array_limit.strip().lower()
    if text in ("none", "unlimited", "0"):
        limit = None  # Slurm's ArrayTaskThrottle=0 lifts it too
    elif text.isascii() and text.isdigit():
        limit = int(text)
    else:
        raise UsageError(f"--array-limit {args.array_limit}: a number of tasks (e.g. 4), or none to lift the limit")
    try:
        array_id = str(uuid.UUID(args.job.strip()))
    except ValueError:
        task = api.request("GET", f"jobs/{arguments.job_id(args.job)}/")  # one of its tasks: its array
        if not task.get("array_id"):
            raise CliError(f"job {task['id']} is not a task of a job array: --array-limit is an array's") from None
        array_id = task["array_id"]
    return _patch_and_say(api, args, f"job-arrays/{array_id}/", {"array_task_limit": limit})
