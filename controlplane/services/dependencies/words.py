"""How dependencies are said: what became of an upstream job (`outcome`), where one stands
(`state_word`, `singleton_word`), what a dependent still waits on (`still_waiting`), and the
engine's sentence on a job out of line as the cycle stores it (`stored_words`; any-of dependencies,
Slurm's ``?``, said as such: `any_of_words`), and the jobs a cancel takes with it (`jobs_named`)."""

from __future__ import annotations

from collections.abc import Sequence

import scheduler_core as engine
from controlplane.choices import DependencyCondition, JobState
from scheduler_core.eligibility import OutOfLine

#: What the dependent waits for, said after "this job was to run only after it ...".
AWAITED = {
    DependencyCondition.AFTER: "started",
    DependencyCondition.AFTER_OK: "succeeded",
    DependencyCondition.AFTER_NOT_OK: "failed",
    DependencyCondition.AFTER_ANY: "ended",
}

#: The same, as the job page and `qm status` say it ("Runs after: job 12 succeeds").
AWAITS = {
    DependencyCondition.AFTER: "starts",
    DependencyCondition.AFTER_OK: "succeeds",
    DependencyCondition.AFTER_NOT_OK: "fails",
    DependencyCondition.AFTER_ANY: "ends",
}


def outcome(state: str, exit_code: int | None) -> str:
    """What became of a job, for a sentence after "job 12 ": "failed (exit 3)", "succeeded"."""
    if state == JobState.FAILED:
        return f"failed (exit {exit_code})" if exit_code is not None else "failed"
    return {
        JobState.SUCCEEDED: "succeeded",
        JobState.CANCELLED: "was cancelled",
        JobState.TIMED_OUT: "timed out",
        JobState.UNSCHEDULABLE: "can never run",
        JobState.RUNNING: "started",
        JobState.PREEMPTING: "started",
    }.get(JobState(state), str(state))


def state_word(state: str, *, held: bool = False, can_run: bool = True) -> str:
    """Where an upstream job stands, in the words the engine's sentence puts in brackets
    ("now running"): its state, "stopping" for a job being stopped; a waiting upstream that is
    held, or that the engine found can never run as asked, says so, since that is why its
    dependent may wait for ever (it waits: the upstream's owner may release or change it)."""
    if state == JobState.PENDING and held:
        return "held"
    if state == JobState.PENDING and not can_run:
        return "pending, and it can never run as asked"
    return "stopping" if state == JobState.PREEMPTING else JobState(state).label.lower()


#: How a singleton's blocker is said in the engine's sentence, after its state:
#: "Waits for job 12 to end (now running; same name “train”, singleton)".
def singleton_word(state: str, name: str, *, held: bool = False, can_run: bool = True) -> str:
    return f"{state_word(state, held=held, can_run=can_run)}; same name “{name}”, singleton"


def still_waiting(n: int) -> str:
    """The end of a dependency-met event's message: what the dependent still waits on."""
    return "; it waits on no other job now" if not n else f"; it still waits on {n} other job{'s' if n != 1 else ''}"


_WAITS_FOR = "Waits for "

_UNTIL_THEN = ": until then it is not in the queue and holds nothing."


def _joined(parts: Sequence[str], word: str) -> str:
    """`parts` as the engine's sentences list them: "a and b", "a, b and c" (or with "or")."""
    if len(parts) <= 2:
        return f" {word} ".join(parts)
    return ", ".join(parts[:-1]) + f" {word} " + parts[-1]


def any_of_words(message: str, would_start_if: str, waits_on: Sequence[engine.DependencyWait]) -> tuple[str, str]:
    """The engine's sentence on a job whose dependencies are any-of (Slurm's ``?``) said as
    such: the engine lists what a job waits on joined by "and" (all of them, `JobSpec.waits_on`:
    it only keeps the job out of line), so the control plane, which decides any-of, says it
    "Waits for any one of job 12 to succeed (now running) or job 13 to succeed (now pending): …"
    and what would start it "job 12 succeeds or job 13 succeeds". Each part is the engine's own
    words for that one dependency (`OutOfLine` of it alone); a sentence not so made is kept."""
    if len(waits_on) < 2:
        return message, would_start_if
    parts, woulds = [], []
    for wait in waits_on:
        one = OutOfLine(sentence_spec("one", (wait,)))
        if not (one.message.startswith(_WAITS_FOR) and one.message.endswith(_UNTIL_THEN)):
            return message, would_start_if
        parts.append(one.message[len(_WAITS_FOR):-len(_UNTIL_THEN)])
        woulds.append(one.would_start_if)
    return (message.replace(_joined(parts, "and"), "any one of " + _joined(parts, "or"), 1),
            would_start_if.replace(_joined(woulds, "and"), _joined(woulds, "or"), 1))


def wait_on(upstream: int, condition: str, word: str) -> engine.DependencyWait:
    """One dependency not met yet as the engine's sentence takes it: the upstream job, the
    condition, where the upstream stands (`state_word`, `singleton_word`)."""
    return engine.DependencyWait(upstream=str(upstream), condition=engine.DependencyCondition(condition),
                                 upstream_state=word)


def sentence_spec(job_id: str, waits_on: tuple[engine.DependencyWait, ...], *, held_by: str = "",
                  hold_reason: str = "") -> engine.JobSpec:
    """A job as the engine's sentence on a job out of line reads it (`OutOfLine`): what it waits
    on, who holds it and why; the rest is any job's."""
    return engine.JobSpec(id=job_id, team="", priority_class="", gpus=1, submitted_at=0.0, waits_on=waits_on,
                          held_by=held_by, hold_reason=hold_reason)


def stored_words(spec: engine.JobSpec, any_of: bool) -> tuple[str, str, str]:
    """(code, sentence, would start if) of a job out of line, as the cycle stores them."""
    why = OutOfLine(spec)
    message, would = any_of_words(why.message, why.would_start_if, spec.waits_on) if any_of else \
        (why.message, why.would_start_if)
    return why.code.value, message, would


#: The jobs a cancel's question or answer names of those it takes with it; the rest are counted.
CANCELLED_WITH_NAMED = 5


def jobs_named(jobs: Sequence[tuple[int, str | None, int | None]]) -> str:
    """Jobs (id, name or None for one the reader may not see, array index) as a cancel says
    those it takes with it: "job 12 (train), job 13 (sweep [0]) and job 14 (another team's)", the
    first CANCELLED_WITH_NAMED of them and "and N more"."""
    named = [f"job {pk} (another team's)" if name is None else
             f"job {pk} ({name})" if index is None else f"job {pk} ({name} [{index}])"
             for pk, name, index in jobs[:CANCELLED_WITH_NAMED]]
    more = len(jobs) - len(named)
    if more:
        return ", ".join(named) + f" and {more} more"
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + f" and {named[-1]}"
