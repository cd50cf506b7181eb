"""The cycles a change of a waiting job would close (`cycle_errors`): a new dependency, or a rename
that makes singletons of the new name wait on it, by which the job would wait on itself. Each is
refused on the field that closes it, saying the chain."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from controlplane.choices import DependencyMode
from controlplane.models import Job, JobDependency
from controlplane.services.dependencies.changes import Replacement, renumbered
from controlplane.services.dependencies.conditions import is_met
from controlplane.services.dependencies.singletons import Blocker, singleton_blockers
from controlplane.services.dependencies.upstream import Upstream, Wanted
from controlplane.services.dependencies.waiting import waiting_rows
from controlplane.services.dependency_text import SINGLETON


def cycle_errors(job_id: int, change: Replacement | None = None, *, renamed: str | None = None) -> dict[str, str]:
    """The cycles a change of waiting job `job_id` would close, each on the field that closes it:
    a change of its dependencies (`change`, judged: on the item that starts the chain, as
    `_change_cycle_errors` says it), or a rename alone (`renamed`, the new name: on ``name``). Call it
    under `lock_changes`, once the job's row says its new name in the caller's transaction: the
    walk reads what waits on what as the next snapshot will, so the singletons of the new name
    submitted after the job wait on it, those of the old one no longer do, and a singleton job
    waits on the jobs of its new name ahead of it. The caller's refusal rolls the name back.

    A rename closes a cycle when the job, by what it waits on (its dependencies not met yet, and
    as a singleton the jobs of its new name running or waiting ahead), reaches itself: through a
    later singleton of the new name that now waits on it (job 16, a singleton named “n”, waits on
    job 15 renamed “n” and submitted before it, which waits afterok on job 16), or, the job a
    singleton, through an earlier job of the new name waiting on it."""
    if change is not None:
        errors = _change_cycle_errors(job_id, change.wanted, change.upstream, change.blockers, any_of=change.any_of)
        return renumbered(errors, change.wanted, change.kept, change.origin)
    return _rename_cycle_errors(job_id, renamed) if renamed is not None else {}


def _rename_cycle_errors(job_id: int, renamed: str) -> dict[str, str]:
    """The cycle a rename alone closes (`cycle_errors`), on ``name``: the first chain from what
    the job waits on back to it, each link with its words; {} for none."""
    row = Job.objects.filter(pk=job_id).values_list("singleton", "submitter_id", "name", "submitted_at",
                                                    "dependency_mode").first()
    if row is None:
        return {}
    singleton, submitter_id, name, submitted_at, mode = row
    any_of = mode == DependencyMode.ANY
    heads = _rename_heads(job_id, any_of=any_of)
    if heads is None:
        return {}  # one alternative met: it waits on nothing, so closes nothing
    if singleton:
        heads += [(b.job_id, SINGLETON) for b in singleton_blockers(submitter_id, name, job_id=job_id,
                                                                    submitted_at=submitted_at)]
    toward, labels = _walk(job_id, {head for head, _ in heads}, any_of=any_of)
    for head, condition in heads:
        if head not in toward:
            continue
        chain = _chain(toward, head, job_id)
        links = [f"job {job_id} waits on job {head} ({_label(condition, name)})"]
        links += [f"which waits on job {after} ({labels[(before, after)]})"
                  for before, after in zip(chain, [*chain[1:], job_id], strict=True)]
        return {"name": (f"named “{renamed}”, job {job_id} would wait on itself: {', '.join(links)}: a cycle, "
                         f"{'neither' if len(chain) == 1 else 'none of them'} could ever start; change its "
                         "dependencies first, or keep its name")}
    return {}


def _rename_heads(job_id: int, *, any_of: bool) -> list[tuple[int, str]] | None:
    """Where a renamed job's chains start: (upstream id, condition) of each of its dependencies
    not met yet; None for an any-of job one of whose alternatives is met (it waits on nothing)."""
    rows = list(JobDependency.objects.filter(job_id=job_id).order_by("upstream_id").values_list(
        "upstream_id", "condition", "upstream__state", "upstream__requeue_count", "satisfied_at"))
    met = [at is not None or is_met(condition, state, has_started=requeues > 0)
           for _, condition, state, requeues, at in rows]
    if any_of and any(met):
        return None
    return [(row[0], row[1]) for row, done in zip(rows, met, strict=True) if not done]


def _chain(toward: dict[int, int], head: int, job_id: int) -> list[int]:
    """The jobs from `head` on, link by link (`_walk`'s `toward`), up to the one that waits on
    `job_id`."""
    chain = [head]
    while toward[chain[-1]] != job_id:
        chain.append(toward[chain[-1]])
    return chain


def _change_cycle_errors(job_id: int, wanted: Sequence[Wanted], upstream: Sequence[Upstream],
                  blockers: Sequence[Blocker] = (), *, any_of: bool = False) -> dict[str, str]:
    """A job that would wait, directly or down a chain, on itself: the item naming the first
    job of each such chain is refused, with the chain (`_walk`). A singleton's `blockers` are
    where its chains start (an earlier job of its name that waits on it: neither would ever
    start)."""
    def item_field(u: Upstream) -> str:
        return f"dependencies.{u.item}.{'job' if wanted[u.item].job is not None else 'array'}"

    errors: dict[str, str] = {}
    for u in upstream:
        if u.job_id == job_id:
            errors[item_field(u)] = f"job {job_id} is this job: a job cannot wait on itself"
    # Where chains start: each new dependency not met yet, and each job a singleton waits on.
    singleton_field = next((f"dependencies.{i}.condition" for i, w in enumerate(wanted) if w.condition == SINGLETON), "")
    if any_of and any(u.met for u in upstream):
        return errors  # any-of, one met already: it waits on nothing
    heads = [(u.job_id, item_field(u), "") for u in upstream if not u.met and u.job_id != job_id]
    heads += [(b.job_id, singleton_field, "singleton: ") for b in blockers]
    toward, _ = _walk(job_id, {head for head, _, _ in heads}, any_of=any_of)
    for head, head_field, lead in heads:
        if head not in toward or head_field in errors:
            continue
        chain = _chain(toward, head, job_id)
        said = " waits on ".join(f"job {pk}" for pk in chain[:2])
        said += "".join(f", which waits on job {pk}" for pk in chain[2:])
        said += (" waits on" if len(chain) == 1 else ", which waits on") + f" this job (job {job_id})"
        errors[head_field] = (f"{lead}{said}: a cycle, {'neither' if len(chain) == 1 else 'none of them'} "
                              "could ever start")
    return errors


def _label(condition: str, name: str) -> str:
    """How a link of a cycle says why it waits: its condition, or the singleton's name."""
    return f"singleton, same name “{name}”" if condition == SINGLETON else condition


def _walk(job_id: int, starts: set[int], *, any_of: bool = False) -> tuple[dict[int, int], dict[tuple[int, int], str]]:
    """Forward from `starts` along what waits (unmet dependencies of waiting jobs, and the jobs
    waiting singletons wait on, as `waits` reads them; `job_id` itself is not followed: its own
    waits are the starts, any-of ones if `any_of`), one query per link of the longest chain: a
    job that started or ended waits on nothing, and a condition met already holds nothing up.
    Returns, for each job that could never start for waiting on `job_id` (in a cycle through
    it), its next link on the shortest way there (empty when there is none), and each link's
    words (its condition, or ``singleton, same name “n”``).

    Which could never start: of the jobs that reach `job_id` (all of them, when every job's
    dependencies are all-of: a cycle is any way back), those that cannot start even if every
    job outside that set does (the greatest such set): an all-of job waiting on one of them, an
    any-of job (Slurm's ``?``) waiting on nothing else; an any-of job with an alternative
    outside can start once that alternative is met, and takes none of the cycle with it."""
    graph = _read_graph(job_id, starts, any_of=any_of)
    reach = _reaching(job_id, graph.waited_by)
    if not any(start in reach for start in starts):
        return {}, graph.labels
    stuck = _stuck(reach, graph)
    if job_id not in stuck:
        return {}, graph.labels
    return _toward(job_id, stuck, graph.waited_by), graph.labels


@dataclass
class _Graph:
    """What waits on what, as `_walk` reads it: each job's jobs it waits on and jobs waiting on
    it, each link's words, and the jobs whose dependencies are any-of."""

    waits_on: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    waited_by: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    labels: dict[tuple[int, int], str] = field(default_factory=dict)
    alternatives: set[int] = field(default_factory=set)


def _read_graph(job_id: int, starts: set[int], *, any_of: bool) -> _Graph:
    """`_walk`'s read, forward from `starts` (one query a link of the longest chain); `job_id`
    waits on the starts, and they lead back to it."""
    graph = _Graph(alternatives={job_id} if any_of else set())
    graph.waits_on[job_id] = sorted(starts)
    seen, frontier = set(starts), set(starts)
    while frontier:
        frontier_now, frontier = frontier, set()
        rows = waiting_rows(frontier_now)
        freed = {r[0] for r in rows if r[9] and is_met(r[2], r[3], has_started=r[4] > 0)}  # any-of, one met
        for waiting, waited_on, condition, state, requeues, _hold, _can_run, name, _at, alternative in rows:
            if waiting in freed or (condition != SINGLETON and is_met(condition, state, has_started=requeues > 0)):
                continue
            if alternative:
                graph.alternatives.add(waiting)
            graph.waits_on[waiting].append(waited_on)
            graph.waited_by[waited_on].append(waiting)
            graph.labels[(waiting, waited_on)] = _label(condition, name)
            if waited_on != job_id and waited_on not in seen:
                seen.add(waited_on)
                frontier.add(waited_on)
    for start in starts:
        graph.waited_by[start].append(job_id)
    return graph


def _reaching(job_id: int, waited_by: dict[int, list[int]]) -> set[int]:
    """The jobs that reach `job_id` (it among them)."""
    reach = {job_id}
    queue = [job_id]
    for target in queue:
        for waiting in waited_by.get(target, ()):
            if waiting not in reach:
                reach.add(waiting)
                queue.append(waiting)
    return reach


def _stuck(reach: set[int], graph: _Graph) -> set[int]:
    """Of the jobs in `reach`, the ones that could never start (an any-of job with an
    alternative outside can)."""
    stuck = set(reach)
    changed = True
    while changed:
        changed = False
        for pk in list(stuck):
            inside = [d for d in graph.waits_on.get(pk, ()) if d in stuck]
            if not inside or (pk in graph.alternatives and len(inside) < len(graph.waits_on[pk])):
                stuck.discard(pk)
                changed = True
    return stuck


def _toward(job_id: int, stuck: set[int], waited_by: dict[int, list[int]]) -> dict[int, int]:
    """Back from `job_id` through the `stuck` jobs: each one's next link on the shortest way."""
    toward: dict[int, int] = {}
    queue = [job_id]
    for target in queue:
        for waiting in waited_by.get(target, ()):
            if waiting != job_id and waiting in stuck and waiting not in toward:
                toward[waiting] = target
                queue.append(waiting)
    return toward
