"""The job `qm submit` sends: its YAML file's fields, then the flags over them, and what qm fills in
(a name from the command, a heterogeneous gang's GPUs from its roles)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from controlplane.cli import arguments
from controlplane.cli.client import UsageError
from controlplane.cli.jobs.dependencies import parse_dependency
from controlplane.cli.jobs.spec_files import load_spec_file, shell_command
from controlplane.services import dependency_text


def spec_from_args(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    """The job to submit: its YAML file's fields (`args.file`), the flags given over them, the
    command after ``--``, and what qm fills in (`_filled_in`)."""
    spec = load_spec_file(args.file) if args.file else {}
    _flags_over(spec, args)
    if args.wrap is not None:  # sbatch --wrap "python a.py && python b.py": one shell line
        if command:
            raise UsageError("give the command after -- or as --wrap, not both")
        if not args.wrap.strip():
            raise UsageError("--wrap is empty: give the command line, e.g. --wrap 'python train.py'")
        command = [args.wrap]
    if command:
        spec["command"] = shell_command(command)
    _filled_in(spec)
    return spec


def _flags_over(spec: dict[str, Any], args: argparse.Namespace) -> None:
    """The flags given, over the YAML file's fields, as the API's fields."""
    flags = {
        "name": args.name, "gpus": args.gpus, "gpus_per_node": args.gpus_per_node,
        "min_gpu_memory_gb": args.min_gpu_memory, "cpus_per_gpu": args.cpus_per_gpu,
        "memory_gb_per_gpu": args.memory_per_gpu, "topology": args.topology,
        "members_on_distinct_nodes": args.distinct_nodes, "min_gpus": args.min_gpus,
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
            raise UsageError(f"Invalid request.\n  hold_reason (--hold-reason {args.hold_reason}): a reason is for a job "
                           "submitted held: add --hold (sbatch -H), or leave the reason out")
        spec["hold_reason"] = args.hold_reason
    if args.checkpoint_every:
        spec["checkpoint_interval_s"] = arguments.duration(args.checkpoint_every, "--checkpoint-every")
    if args.env:
        spec["env"] = _env_with_flags(spec.get("env"), args.env)
    if args.dependency:
        spec["dependencies"] = parse_dependency(args.dependency)
        if isinstance(spec["dependencies"], dependency_text.AnyOf):
            spec["dependency_mode"] = "any"  # afterok:12?afterok:13: any one of them


def _env_with_flags(env: Any, items: list[str]) -> dict[str, Any]:
    """The YAML file's `env:` with each `--env NAME=VALUE` over it."""
    if not isinstance(env or {}, dict):
        raise UsageError("env in the YAML file must be a mapping of NAME: value, to add --env to it")
    env = dict(env or {})
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--env {item}: expected NAME=VALUE")
        env[key] = value
    return env


def _filled_in(spec: dict[str, Any]) -> None:
    """What qm fills in: a name from the command, a heterogeneous gang's GPUs from its roles;
    refused, a job with no name or no GPUs to fill in."""
    if "name" not in spec and spec.get("command"):
        # The program's name: the first word as the shell reads it (`'my prog.py' --x` is 'my prog.py').
        try:
            words = shlex.split(str(spec["command"]))
        except ValueError:  # an unfinished quote: the node's shell will refuse it, the name need not
            words = str(spec["command"]).split()
        if words:
            spec["name"] = Path(words[0]).name or words[0]
    if "name" not in spec:
        raise UsageError("a job needs a name: give --name, a `name:` in the YAML file, or a command after --")
    if "gpus" not in spec and _roles_gpus(spec.get("roles")) is not None:
        spec["gpus"] = _roles_gpus(spec["roles"])  # a heterogeneous gang: its roles' sum
    if "gpus" not in spec and not spec.get("roles"):
        elastic = "min_gpus" in spec or "max_gpus" in spec
        bounds = (f"; an elastic one too: its preferred size, from --min-gpus {spec.get('min_gpus', '?')} "
                  f"to --max-gpus {spec.get('max_gpus', '?')}") if elastic else ""
        raise UsageError(f"a job needs --gpus (or `gpus:` in the YAML file){bounds}")
    # Roles qm cannot add up (a member's `gpus:` for `gpus_per_member:`, a count left out) go to
    # the API, which names each role's field at fault; "a job needs --gpus" sent the user to the
    # one field qm would have filled in.


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
