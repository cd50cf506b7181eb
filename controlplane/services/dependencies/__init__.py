"""Job dependencies (Slurm's ``--dependency=afterok:12:13,afterany:14``): the rules, in one home.

A dependency says that job J may start only once job U meets a condition:

- ``after``: U has started (or ended without starting: Slurm's "begun execution or been
  cancelled"). A preempted or requeued U does not take it back.
- ``afterok``: U succeeded. Never met once U failed, was cancelled, timed out or can never run.
- ``afternotok``: U ended without succeeding (failed, cancelled, timed out, can never run).
  Never met once U succeeded.
- ``afterany``: U ended, however.

- ``singleton`` (a flag on the job, `Job.singleton`, not a row: it names no job): no other job
  of its submitter and name runs (running or stopping, whenever submitted) or waits ahead of it
  (pending, held or not, submitted earlier: submitted_at, then id), as Slurm's
  ``--dependency=singleton`` checks it. So such jobs run one at a time in submission order; it is
  never "never met" (the jobs ahead of it end, one way or another). Its blockers are read live
  (`waiting.waiting_rows`), not stored: a job of that name that starts later (a non-singleton one) holds
  it up too, and one that ends frees it (`settling`, an event, as for a condition met).

- ``aftercorr`` (a job array's submit): each task after the task of the same index of the array
  named succeeded; recorded per task as ``afterok`` on that task (`resolve`'s `indices`,
  `Upstream.index`), a task without one waits for nothing (as Slurm).

A job's dependencies are all-of (every one met: Slurm's ``,``, the default) or any-of
(`Job.dependency_mode` ``any``, Slurm's ``?``): any one met is enough, and the job is cancelled
only once none can be met (`cancels.without_alternatives`); while none is met it waits on the
alternatives still possible, its sentence saying "any one of … or …" (`any_of_words`: the
engine lists them joined by "and").

The control plane decides what is met; the engine only keeps a job with unmet dependencies out
of line (scheduler_core/eligibility.py, ``JobSpec.waits_on``). Three places use these rules:

1. the submit (`resolve`, `record`): refuses a dependency that can already never be met, and
   records one already met as satisfied at once; a change of a waiting job's dependencies
   (PATCH jobs/{id}/, `judge`, `replace`) the same way, and refuses a cycle too;
2. the transitions (`started`, `ended`, called from services/transitions.py wherever a job
   starts or ends): mark the dependents' conditions satisfied, and cancel a waiting dependent
   whose condition can no longer be met (reason ``DependencyNeverSatisfied``), which in turn
   ends its own dependents' hopes, down a chain of any length (a work list, no recursion);
3. the snapshot (`waits`): the unmet dependencies of every waiting job, in one query.

Concurrency: the submit locks its upstream jobs' rows FOR SHARE (PostgreSQL) while it reads
their states and writes its dependency rows, and every transition updates the upstream job's
row before it looks for dependents. So either the transition waits for the submit to commit and
then finds its new dependency rows (READ COMMITTED: each statement sees what committed before
it), or the submit waits for the transition and reads the new state: a dependency is never
left waiting on a job that already ended.

A change (`judge`, then `replace`) takes a transaction-wide advisory lock first (`lock_changes`;
a rename takes it too, since it changes which singletons wait on the job), so changes of
dependencies run one at a time and each cycle check (`cycle_errors`, once the job's row says
its new name) sees every edge the others wrote, then
locks its upstream jobs FOR SHARE before services/holds.update locks the job itself: the order
a transition takes them in (the upstream job's row, then its dependents'), so the two never
deadlock. A cycle's bind of a job whose dependencies changed after its snapshot finds them in
`waiting_among` and drops it as stale. The text form (``afterok:12:13,afterany:14``) is read and
written by services/dependency_text.py, shared with `qm`.

Where each lives (one module a concept; this package's names are the ones other code uses):

- `conditions`: what each condition means (`is_met`, `never_met`), the limits and the reasons
  (`NEVER_SATISFIED`, `SATISFIED`), and `Change`, an upstream job that just started or ended;
- `words`: how they are said: what became of a job (`outcome`), where an upstream stands
  (`state_word`), and the engine's sentence said as the cycle stores it (`any_of_words`);
- `upstream`: what a submit asks for (`Wanted`), judged and locked (`resolve` → `Upstream`, or
  `Refused` naming each field at fault);
- `recording`: the submit's rows (`record`) and a new job's first words (`waiting_words`);
- `singletons`: what holds a singleton up (`Blocker`, `singleton_blockers`);
- `waiting`: what waiting jobs wait on, read for the snapshot (`waits`) and the bind
  (`waiting_among`);
- `changes`: a change of a waiting job's dependencies (`judge`, `replace`) and its lock;
- `cycles`: the cycles a change or a rename would close (`cycle_errors`);
- `renames`: a rename's rewording of the jobs it frees or holds up (`reword_after_rename`);
- `settling`: a job's start or end met or doomed its dependents' conditions (`started`, `ended`);
- `cancels`: a waiting job whose dependency can never be met, cancelled down the chain, and the
  jobs one cancel took with it (`cancelled_with`);
- `pages`: the read side, for the API and the job's page (`of_jobs`, `page_of`, `singleton_page`), and
  an array's Cancel question (`waiting_on_any_of`).
"""

from controlplane.services.dependencies.cancels import cancelled_with
from controlplane.services.dependencies.changes import Replacement, judge, lock_changes, replace, text_now
from controlplane.services.dependencies.conditions import (
    MAX_DEPENDENCIES,
    MAX_UPSTREAM_JOBS,
    NEVER_SATISFIED,
    SATISFIED,
    Change,
    is_met,
    never_met,
)
from controlplane.services.dependencies.cycles import cycle_errors
from controlplane.services.dependencies.pages import of_jobs, page_of, singleton_page, waiting_on_any_of
from controlplane.services.dependencies.recording import corresponding_words, record, waiting_words
from controlplane.services.dependencies.renames import reword_after_rename
from controlplane.services.dependencies.settling import ended, started
from controlplane.services.dependencies.singletons import Blocker, singleton_blockers
from controlplane.services.dependencies.upstream import (
    UNKNOWN_INDICES,
    Refused,
    Upstream,
    Wanted,
    resolve,
    singleton_of,
    wanted_from,
)
from controlplane.services.dependencies.waiting import waiting_among, waits
from controlplane.services.dependencies.words import AWAITS, any_of_words, jobs_named, outcome, state_word

__all__ = [
    "AWAITS", "MAX_DEPENDENCIES", "MAX_UPSTREAM_JOBS", "NEVER_SATISFIED", "SATISFIED", "UNKNOWN_INDICES", "Blocker",
    "Change", "Refused", "Replacement", "Upstream", "Wanted", "any_of_words", "cancelled_with", "corresponding_words",
    "cycle_errors", "ended", "is_met", "jobs_named", "judge", "lock_changes", "never_met", "of_jobs", "outcome",
    "page_of", "record", "replace", "resolve", "reword_after_rename", "singleton_blockers", "singleton_of",
    "singleton_page", "started", "state_word", "text_now", "waiting_among", "waiting_on_any_of", "waiting_words", "waits",
    "wanted_from",
]
