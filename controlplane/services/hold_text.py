"""A hold in words, with no dependency on the services that hold and release: who holds a
job as the engine's sentence names them, the engine's own words for a held job, and what is
wrong with a hold's reason. Submit, requeue, the snapshot, dependencies and the hold service
itself all say a hold this way (services/holds.py does the holding)."""

from __future__ import annotations

from controlplane.choices import JobHold
from controlplane.models.jobs import HOLD_REASON_MAX_LENGTH
from controlplane.services.plain_text import hidden_character_problem
from scheduler_core.eligibility import OutOfLine
from scheduler_core.types import JobSpec


def hold_label_of(hold: str, username: str) -> str:
    """Who holds a job, as the engine's sentence says it (`JobSpec.held_by`): "alice", or
    "admin root" for an admin's hold ("a user" / "an admin" once the account is gone)."""
    if hold == JobHold.ADMIN:
        return f"admin {username}" if username else "an admin"
    return username or "a user"


def held_sentence(label: str, reason: str = "") -> tuple[str, str]:
    """The engine's own words for a job held by `label` for `reason` (why it waits and what
    would start it), stored at once so the job's page says it before the next cycle does."""
    why = OutOfLine(JobSpec(id="held", team="", priority_class="", gpus=1, submitted_at=0.0, held_by=label,
                            hold_reason=reason))
    return why.message, why.would_start_if


def reason_problem(reason: str) -> str:
    """What is wrong with a hold's (a requeue's, a cordon's) reason, in words for its field; ""
    when nothing is. One line of text by the one rule (services/plain_text.py)."""
    if len(reason) > HOLD_REASON_MAX_LENGTH:
        return f"at most {HOLD_REASON_MAX_LENGTH} characters ({len(reason)} given)"
    return hidden_character_problem(reason) or ""
