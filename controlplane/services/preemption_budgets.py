"""Which unfinished jobs of a priority class have spent its preemption budget in the current
window, and until when: what lowering the budget does to them, said on saving it.

Unfinished, not only running: the cycle counts every unfinished job's preemptions
(snapshot._recent_requeues), and a job preempted is requeued, so right after a preemption it
waits. Started again inside the window, it is out of preemption's reach from its first second
until the window has let enough of them go; a running one is now. A finished job runs no more.

A job whose preemptions inside its class's budget window reach the budget is never preempted
again, for priority nor to give back borrowed GPUs (scheduler_core/victims.py), until enough of
them leave the window. The window is counted where the cycle counts it (services/snapshot.py,
preemptions_in_window): the job's requeues by preemption (BUDGET_KINDS) from its events,
or, with one preemption or its events gone, the job's count and its last preemption's time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from controlplane.choices import FINISHED_JOB_STATES
from controlplane.models import Event, Job, PriorityClass
from controlplane.services.config_audit import span
from controlplane.services.fleet_figures import RUNNING_STATES
from controlplane.services.snapshot import BUDGET_KINDS, preemptions_in_window
from scheduler_core.sentences import counted


@dataclass(frozen=True)
class SpentBudget:
    """An unfinished job whose budget is spent: ``used`` preemptions inside the window, of a
    budget of ``budget``, spent ``until`` the earliest time it is under its budget again;
    ``waiting``: not running now (requeued, held), protected from when it starts, if before."""

    job_id: int
    used: int
    budget: int
    until: datetime
    waiting: bool = False

    def said(self) -> str:
        waiting = " (waiting)" if self.waiting else ""
        return f"job {self.job_id}{waiting}: {self.used} used, spent until {self.until:%Y-%m-%d %H:%M} UTC"

    def record(self) -> dict[str, object]:
        return {"job": self.job_id, "used": self.used, "budget": self.budget, "until": self.until.isoformat(),
                "waiting": self.waiting}


def spent_budgets(priority_class: PriorityClass, now: datetime | None = None) -> list[SpentBudget]:
    """The unfinished jobs of ``priority_class`` (module docstring) whose preemptions inside its
    budget window reach its (possibly unsaved) ``preemption_budget``, by job. None for a budget of 0 (never
    preempted at all: PriorityClass.budget_warning says it) or a window of 0. Two queries."""
    budget, window_s = priority_class.preemption_budget, priority_class.budget_window_s
    if not budget or not window_s or priority_class.pk is None:
        return []
    now = timezone.now() if now is None else now
    window = timedelta(seconds=window_s)
    since = now - window
    jobs = list(Job.objects.filter(priority_class_id=priority_class.pk, preemption_count__gte=budget,
                                   last_preempted_at__gte=since).exclude(state__in=FINISHED_JOB_STATES)
                .order_by("pk").values_list("pk", "preemption_count", "last_preempted_at", "state"))
    if not jobs:
        return []
    times: dict[int, list[float]] = {}
    for job_id, at in (Event.objects.filter(job_id__in=[pk for pk, _, _, _ in jobs], kind__in=BUDGET_KINDS,
                                            created_at__gte=since)
                       .order_by("job_id", "created_at").values_list("job_id", "created_at")):
        times.setdefault(job_id, []).append(at.timestamp())
    spent = []
    for job_id, count, last, state in jobs:
        used, frees_at = preemptions_in_window(times.get(job_id, []), since.timestamp(), count, last.timestamp(),
                                               window_s, budget)
        if used >= budget:
            spent.append(SpentBudget(job_id, used, budget, datetime.fromtimestamp(frees_at, tz=UTC),
                                     waiting=state not in RUNNING_STATES))
    return spent


def lowered_under_use(priority_class: PriorityClass, was: int | None,
                      now: datetime | None = None) -> tuple[str, list[SpentBudget]]:
    """What lowering ``priority_class``'s budget from ``was`` does to its unfinished jobs: the
    admin's warning and the jobs it newly protects (spent under the new budget, not under the
    old one), running ones now and waiting ones from when they start; ("", []) when it lowered
    nothing or protects no one newly."""
    budget = priority_class.preemption_budget
    if was is None or not budget or budget >= was:
        return "", []
    spent = [s for s in spent_budgets(priority_class, now) if s.used < was]
    if not spent:
        return "", []
    listed = "; ".join(s.said() for s in spent[:5]) + (f"; and {len(spent) - 5} more" if len(spent) > 5 else "")
    one = len(spent) == 1
    waiting = sum(s.waiting for s in spent)
    if not waiting:
        jobs, never = counted(len(spent), "running job") + " of it", "it is" if one else "each is"
    elif waiting == len(spent):
        jobs = counted(len(spent), "waiting job") + " of it"
        never = "from when it starts, it is" if one else "from when it starts, each is"
    else:
        jobs = f"{counted(len(spent), 'job')} of it ({len(spent) - waiting} running, {waiting} waiting)"
        never = "each is, a waiting one from when it starts,"
    return (
        f"Priority class {priority_class.name}'s preemption budget went from {was} to {budget} per job per "
        f"{span(priority_class.budget_window_s)}: {jobs} already used {budget} or more in the current window "
        f"({listed}). Until then {never} never preempted, not for priority and not to give back borrowed GPUs to "
        f"a lending team. Saved as asked; to keep {'it' if one else 'them'} preemptible, give a budget above "
        f"what {'it' if one else 'they'} used.",
        spent,
    )


def audit_of(spent: list[SpentBudget]) -> tuple[str, dict[str, object] | None]:
    """What the class's config.changed event adds for the jobs a lowered budget newly protects
    (:func:`lowered_under_use`): words after its line, and ``budget_spent`` in its data; the
    admin's save and the API's PATCH record it alike."""
    if not spent:
        return "", None
    return (f" (budget lowered under what {counted(len(spent), 'unfinished job')} already used in the window: "
            + "; ".join(s.said() for s in spent) + ")"), {"budget_spent": [s.record() for s in spent]}
