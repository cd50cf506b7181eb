"""A job's spec from a YAML file (`qm submit job.yaml`, `-` for standard input): the API's fields, with
the flags' spellings too (`time:`, `priority:`), a text field's value read as the text written
(YAML's `name: 1.10` is the number 1.1, `name: yes` true, `name: 2026-11-29` a date), other
fields' dates as written; and a command line as the node agent's shell runs it."""

from __future__ import annotations

import difflib
import shlex
import sys
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from controlplane.cli import arguments
from controlplane.cli.client import UsageError

# YAML keys and flags that are spelled differently from the API's fields.
YAML_ALIASES = {"time": "runtime_limit_s", "priority": "priority_class", "checkpoint_every": "checkpoint_interval_s"}

#: The fields a job file may give: the API's submit fields (a job array's, `array:` its own),
#: kept equal to its serializer's by tests/controlplane/cli/test_qm_yaml_unknown_keys_first.py.
JOB_FIELDS = frozenset({
    "name", "gpus", "gpus_per_node", "gpu_type", "gpu_types", "min_gpu_memory_gb", "cpus_per_gpu",
    "memory_gb_per_gpu", "topology", "members_on_distinct_nodes", "min_gpus", "max_gpus", "roles", "priority_class", "project", "team",
    "workload", "runtime_limit_s", "checkpoint_interval_s", "command", "env", "dependencies", "dependency_mode",
    "hold", "hold_reason", "array", "array_task_limit",
})


#: The job fields whose values are text (their own, a list's items, a mapping's values): read
#: as written, never as the number, boolean or date YAML would make of them, so `name: 1.10`
#: submits "1.10" where it submitted the number 1.1 (stored as "1.1") and `team: 007` "007"
#: where it submitted 7. The API refuses a number where text goes (services/plain_text.py).
TEXT_FIELDS = frozenset({"name", "gpu_type", "gpu_types", "priority_class", "project", "team", "workload", "topology",
                         "command", "env", "hold_reason", "array", "dependency_mode"})
#: The durations (`time:`, `checkpoint_every:` and their API spellings): read as written and then
#: as their flags read them, so `time: 4:00:00` is four hours, as `--time 4:00:00` is. YAML 1.1
#: reads it as the sexagesimal number 14400, which `time:` took as minutes: ten days (until 7 Dec),
#: and `time: 1:30` as 90 minutes where `--time 1:30` (MM:SS, as sbatch reads it) is 90 seconds.
DURATION_FIELDS = frozenset({"runtime_limit_s", "checkpoint_interval_s"})
#: A role's text fields (each role of `roles:` is a mapping of its own).
ROLE_TEXT_FIELDS = frozenset({"name", "gpu_type", "gpu_types"})
#: What YAML makes of a plain scalar other than text (null stays null: nothing was written).
_NOT_TEXT_TAGS = frozenset(f"tag:yaml.org,2002:{kind}" for kind in ("int", "float", "bool", "timestamp"))
_TEXT_TAG = "tag:yaml.org,2002:str"


class _JobFileLoader(yaml.SafeLoader):
    """YAML's safe loader, with the values of the text fields kept as the text written."""

    def construct_document(self, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                name = str(key.value).replace("-", "_") if isinstance(key, yaml.ScalarNode) else ""
                field = YAML_ALIASES.get(name, name)
                if field in TEXT_FIELDS or field in DURATION_FIELDS:
                    _as_written(value)
                elif field == "roles" and isinstance(value, yaml.SequenceNode):
                    for role in value.value:
                        if isinstance(role, yaml.MappingNode):
                            for role_key, role_value in role.value:
                                if str(role_key.value).replace("-", "_") in ROLE_TEXT_FIELDS:
                                    _as_written(role_value)
        return super().construct_document(node)


def _as_written(node: yaml.Node) -> None:
    """A plain scalar read as its text; a list's items and a mapping's values likewise."""
    if isinstance(node, yaml.ScalarNode):
        if node.style is None and node.tag in _NOT_TEXT_TAGS:
            node.tag = _TEXT_TAG
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _as_written(item)
    elif isinstance(node, yaml.MappingNode):
        for _, value in node.value:
            _as_written(value)


def load_spec_file(path: str) -> dict[str, Any]:
    """The job fields of the YAML file at `path` (`-`: standard input), as the API's."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path} is not UTF-8 text (byte {exc.start}): save it as UTF-8") from exc
    _not_a_batch_script(path, text)
    try:
        data = _plain(yaml.load(text, Loader=_JobFileLoader))  # a SafeLoader: no Python objects
    except yaml.YAMLError as exc:
        raise UsageError(f"{path} is not valid YAML: {_yaml_problem(exc)}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path} {_what_it_holds(data)}: write one job field a line, e.g. name: train and gpus: 8")
    _no_unknown_keys(path, data)
    spec: dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        field = YAML_ALIASES.get(name, name)
        spec[field] = _field_value(path, key, name, field, value)
    return spec


def _no_unknown_keys(path: str, data: dict[Any, Any]) -> None:
    """Refuse the keys no job has, each named (with the field meant when one is close), before
    anything else is checked: `gpu: 2` answered "a job needs --gpus", qm's own check of the field
    it left out, and the typo went unsaid."""
    spellings = sorted(JOB_FIELDS | set(YAML_ALIASES))
    lines = []
    for key in data:
        name = str(key).replace("-", "_")
        if YAML_ALIASES.get(name, name) in JOB_FIELDS:
            continue
        close = difflib.get_close_matches(name, spellings, n=1, cutoff=0.75) or _field_holding_words(name, spellings)
        lines.append(f"  {key}: unknown field; " + (f"did you mean {close[0]}?" if close else
                                                    f"the job fields are {', '.join(spellings)}"))
    if lines:
        where = "standard input" if path == "-" else path
        raise UsageError(f"{where} has {'a key' if len(lines) == 1 else 'keys'} no job has:\n" + "\n".join(lines))


def _field_holding_words(name: str, spellings: list[str]) -> list[str]:
    """The one field whose name has `name`'s words in it, whole and in order, when `name` has two
    words or more: `distinct_nodes` is members_on_distinct_nodes, a shortening difflib scores
    just under its cutoff (0.72). One word alone (`nodes`, `limit`) suggests nothing, nor words
    in several fields' names (`per_gpu`: cpus_per_gpu or memory_gb_per_gpu), so no guess misleads."""
    if "_" not in name.strip("_"):
        return []
    found = [s for s in spellings if f"_{name}_" in f"_{s}_"]
    return found if len(found) == 1 else []


def _what_it_holds(data: Any) -> str:
    """A job file that is no mapping, said as what it holds (it said "got NoneType" of an empty one)."""
    if data is None:
        return "is empty"
    if isinstance(data, list):
        return "holds a list, not a job's fields (one job a file; --array for many)"
    return f"holds one value ({str(data)[:40]}), not a job's fields"


def _not_a_batch_script(path: str, text: str) -> None:
    """Refuse a shell script (`#!/bin/bash`, `#SBATCH` lines), as a Slurm user gives sbatch one,
    saying how qm runs it: its directives as flags and its text as the command (what sbatch sends
    too). It was read as YAML: "job.sh must be a mapping of job fields (name, gpus, ...), got str"."""
    lines = text.splitlines()
    directives = [line.split(None, 1)[1].strip() for line in lines
                  if line.startswith("#SBATCH") and len(line.split(None, 1)) == 2]
    if not (lines and lines[0].startswith("#!")) and not directives:
        return
    script = "SCRIPT" if path == "-" else shlex.quote(path)
    named = any(d.startswith(("-J", "--job-name")) for d in directives) or path == "-"
    # sbatch names the job after its script; qm would name it after the script's first word (#!/bin/bash).
    flags = " ".join(([] if named else [f"-J {shlex.quote(Path(path).name)}"]) + (directives or ["--gpus N"]))
    raise UsageError(f"{'standard input' if path == '-' else path} is a shell script, not a YAML file of job fields: qm reads no #SBATCH lines. Give "
                   f"them as flags and the script as the command, e.g. qm submit {flags} --wrap \"$(cat {script})\" "
                   "(or -- bash PATH, the script where the nodes see it)")


def _field_value(path: str, key: Any, name: str, field: str, value: Any) -> Any:
    """A YAML file's value (of `key`, `name` with dashes as underscores) as the API's `field`
    takes it: a duration's text in seconds, a command's list of words as one line, ..."""
    # A duration arrives as the text written (DURATION_FIELDS): `time: 30` is `--time 30`,
    # minutes; `runtime_limit_s: 30` seconds.
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
    return value


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
    """An environment value left empty (`DEBUG:`, YAML's null) is refused with the fix rather
    than the API's "This field may not be null."; every other scalar is read as written."""
    empty = [name for name, value in env.items() if value is None]
    if empty:
        raise UsageError(f"{path}: env.{empty[0]} has no value: give one ({empty[0]}: \"\" for an empty one)")


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
