"""`--dependency` as `qm submit` and `qm update` take it (Slurm's ``afterok:12:13,afterany:14``, read
by services/dependency_text.py, shared with the API), and a job's dependencies as `qm status`
and `qm submit` say them (`runs_after`)."""

from __future__ import annotations

from typing import Any

from controlplane.cli.client import UsageError
from controlplane.services import dependency_text

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
        raise UsageError(f"--dependency {text}: {exc}") from None


def update_dependency(text: str) -> list[dict[str, Any]] | str:
    """`qm update -d`: the whole new list (`parse_dependency`), or an edit of the list it has,
    `+=afterok:5` / `-=afterany:7` (scontrol update dependency+= / dependency-=; `+afterok:5`
    and `-afterany:7` too), checked here and sent as the API's text, `+afterok:5`, which the
    server applies to the list as it is then."""
    try:
        edit = dependency_text.parse_edit(text)
    except dependency_text.BadDependencyText as exc:
        raise UsageError(f"--dependency {text}: {exc}") from None
    if edit is None:
        return parse_dependency(text)
    rest = "".join(text.split())[1:].lstrip("=")
    return f"{edit.op}{rest}"


#: An upstream job's state in words, as the job page says it ("timed out", not "timed_out").
_STATE_WORDS = {"timed_out": "timed out", "unschedulable": "can never run", "preempting": "stopping"}


def runs_after(job: dict[str, Any]) -> str:
    """`job 12 succeeds (running), job 13 ends (met)`: the job's dependencies and where each
    stands; any-of ones (Slurm's `?`) `any of: job 12 succeeds (running) or job 13 fails
    (pending)`; empty for none."""
    parts = []
    for dep in job.get("dependencies") or []:
        where = "met" if dep.get("satisfied_at") else _STATE_WORDS.get(dep.get("state") or "?", dep.get("state"))
        parts.append(f"job {dep['job']} {DEPENDENCY_TYPES.get(dep['condition'], dep['condition'])} ({where})")
    if job.get("dependency_mode") == "any" and len(parts) > 1:
        return "any of: " + " or ".join(parts)
    if job.get("singleton"):
        parts.append(f"singleton (one job named {job.get('name', '')!r} of its submitter at a time)")
    return ", ".join(parts)
