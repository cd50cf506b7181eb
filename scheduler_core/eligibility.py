"""Phase 1a: who is in line at all.

A job held by someone (Slurm's ``scontrol hold``, Kueue's inactive workload) or waiting for a
dependency (Slurm's ``--dependency``) is not queued: it takes no place in the order, no quota,
no reservation and no victim, and does not count as a job that waits for whole nodes in the
fleet figures. It is still explained every cycle, so its owner reads why it does not start: a
held job is ranked after every queued job, a job waiting for a dependency has no queue
position at all (it cannot start until another job starts or ends)."""

from __future__ import annotations

from scheduler_core.types import DependencyCondition, DependencyWait, JobSpec, Queued, ReasonCode

_CONDITION_WORDS = {
    DependencyCondition.AFTER: ("to start", "starts"),
    DependencyCondition.AFTER_OK: ("to succeed", "succeeds"),
    DependencyCondition.AFTER_NOT_OK: ("to fail", "fails"),
    DependencyCondition.AFTER_ANY: ("to end", "ends"),
}


def in_line(spec: Queued) -> bool:
    """Whether the job is queued this cycle (not held, every dependency met)."""
    return not spec.held_by and not spec.waits_on


def out_of_line(pending: tuple[JobSpec, ...]) -> list[JobSpec]:
    """The jobs kept out of the queue, oldest first (submission time, then id): the order
    held jobs are ranked in, after every queued job, and the order all are explained in."""
    kept = [spec for spec in pending if not in_line(spec)]
    kept.sort(key=lambda spec: (spec.submitted_at, spec.id))
    return kept


class OutOfLine:
    """Why a job is out of line: its code, sentence and what would put it in line."""

    __slots__ = ("code", "message", "would_start_if")

    def __init__(self, spec: JobSpec) -> None:
        waits = _waits_sentence(spec.waits_on)
        if spec.held_by:
            self.code = ReasonCode.HELD
            # The holder's reason, when given, as they wrote it ("waiting for dataset v3").
            because = f"{spec.hold_reason} — " if spec.hold_reason else ""
            self.message = (f"Held by {spec.held_by}: {because}until it is released it is not in the "
                            "queue and holds nothing.")
            if waits:
                self.message += f" It also waits for {waits}."
            self.would_start_if = "it is released" + (f" and {_met_clause(spec.waits_on)}" if waits else "")
        else:
            self.code = ReasonCode.WAITING_FOR_DEPENDENCY
            self.message = f"Waits for {waits}: until then it is not in the queue and holds nothing."
            self.would_start_if = _met_clause(spec.waits_on)


def _waits_sentence(waits: tuple[DependencyWait, ...]) -> str:
    parts = []
    for wait in waits:
        words = f"job {wait.upstream} {_CONDITION_WORDS[wait.condition][0]}"
        if wait.upstream_state:
            words += f" (now {wait.upstream_state})"
        parts.append(words)
    return _and(parts)


def _met_clause(waits: tuple[DependencyWait, ...]) -> str:
    return _and([f"job {w.upstream} {_CONDITION_WORDS[w.condition][1]}" for w in waits])


def _and(parts: list[str]) -> str:
    if len(parts) <= 2:
        return " and ".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]
