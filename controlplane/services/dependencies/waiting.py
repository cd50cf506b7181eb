"""What waiting jobs wait on now: every waiting job's unmet dependencies and singleton blockers, for
the snapshot (`waits`, one statement: `waiting_rows`), and which of a batch still waits, for the
cycle's bind (`waiting_among`)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection
from django.db.models import Count, Q

from controlplane.choices import DependencyCondition, DependencyMode, JobState
from controlplane.models import Job, JobDependency
from controlplane.services.dependencies.conditions import is_met, never_met
from controlplane.services.dependencies.singletons import Blocker, shown, singleton_edges
from controlplane.services.dependencies.words import singleton_word, state_word
from controlplane.services.dependency_text import SINGLETON


def waits(job_ids: Iterable[int] | None = None, *,
          any_of: set[int] | None = None) -> dict[int, list[tuple[int, str, str]]]:
    """Per waiting job, its dependencies not met yet: (upstream id, condition, the upstream's
    state word), by upstream id; a waiting singleton's job of its name ahead of it as ``afterany``
    on that job, its word saying why ("running; same name “train”, singleton"). One query per
    cycle, whatever the number of jobs (`waiting_rows`). A condition
    its upstream meets already (a transition missed; it cannot, but the snapshot does not
    trust it) does not keep the job waiting. `job_ids`: only these jobs' (a rename's rewording).
    A job whose dependencies are any-of (Slurm's ``?``) waits on all of them while none is met
    (the engine keeps it out of line), and on none once one is; `any_of`, when given, receives
    the ids of those that wait (their sentences say "any one of": `any_of_words`)."""
    out, alternatives, freed, singletons = _sorted_waits(waiting_rows(job_ids))
    # An any-of job waits on its alternatives still possible (all of them, if none is: its
    # cancel is on its way in the transaction that ended the last one).
    for job_id, rows in alternatives.items():
        if job_id in freed:
            continue
        out[job_id] = [row[:3] for row in rows if not row[3]] or [row[:3] for row in rows]
        if any_of is not None:
            any_of.add(job_id)
    # A singleton waits on the jobs of its name ahead of it: said as "to end", naming the one
    # that goes before it (`shown`), after its own dependencies.
    for job_id, blockers in singletons.items():
        out.setdefault(job_id, []).extend(
            (b.job_id, str(DependencyCondition.AFTER_ANY), b.word) for b in shown(blockers))
    return out


def _sorted_waits(rows: Iterable[tuple[Any, ...]]) -> tuple[dict[int, list[tuple[int, str, str]]],
                                                            dict[int, list[tuple[int, str, str, bool]]], set[int],
                                                            dict[int, list[Blocker]]]:
    """`waiting_rows` sorted out for `waits`: per job, its all-of dependencies not met (upstream,
    condition, word); its any-of ones not met (the same, and whether it can never be met); the
    any-of jobs one of whose alternatives is met (`freed`); and a singleton's blockers."""
    out: dict[int, list[tuple[int, str, str]]] = {}
    singletons: dict[int, list[Blocker]] = {}
    freed: set[int] = set()  # any-of jobs one of whose alternatives is met
    alternatives: dict[int, list[tuple[int, str, str, bool]]] = {}
    for job_id, upstream_id, condition, state, requeues, hold, can_run, name, submitted_at, alternative in rows:
        if condition == SINGLETON:
            singletons.setdefault(job_id, []).append(
                Blocker(upstream_id, state, singleton_word(state, name, held=bool(hold), can_run=can_run), submitted_at))
            continue
        if is_met(condition, state, has_started=requeues > 0):
            if alternative:
                freed.add(job_id)
            continue
        word = state_word(state, held=bool(hold), can_run=can_run)
        if alternative:
            alternatives.setdefault(job_id, []).append((upstream_id, condition, word, never_met(condition, state)))
        else:
            out.setdefault(job_id, []).append((upstream_id, condition, word))
    return out, alternatives, freed, singletons


def waiting_among(job_ids: Iterable[int], *, singletons: Iterable[int] | None = None,
                  alternatives: Iterable[int] | None = None) -> set[int]:
    """The jobs among `job_ids` that wait on a job now (a dependency not met, by the rule `waits`
    reads; a singleton with a job of its name running or waiting ahead, or bound with it in
    this batch, which `job_ids` are, and no singleton itself): the cycle's bind drops them, as a
    job whose dependencies were changed after its snapshot read it, and so two singletons of a
    name never start in one cycle. One query (a probe of the live jobs' index per singleton
    among them, not a read of their groups); none for no job. `singletons`: those of `job_ids`
    that are singletons, when the caller read it under their rows' lock (the bind: a change
    waits for that lock); none of them: the statement reads the dependencies only, as before
    singletons (a shorter plan: 1 ms less for 40 jobs). `alternatives`: likewise, those whose
    dependencies are any-of (Slurm's `?`): the statement is the one before any-of, and one more
    query asks which of those have an alternative met already, only when there is one; not
    given, the statement reads every job's mode and an any-of job's met rows itself."""
    ids = list(job_ids)
    if not ids:
        return set()
    known = alternatives is not None
    alts = set(alternatives or ())
    if singletons is not None and not set(singletons):
        return _waiting_on_dependencies(ids, alts if known else None)
    rows = _waiting_rows_with_singletons(ids, list(singletons) if singletons is not None else ids, known=known)
    if known:
        return _still_waiting_of(r if r[1] == SINGLETON else _with_modes([r], alts)[0] for r in rows) - _met_any(alts)
    return _still_waiting_of(rows)


def _with_modes(rows: Iterable[tuple[Any, ...]], alts: set[int]) -> list[tuple[Any, ...]]:
    """The rows of the statement before any-of, with the modes the caller read (`alts`: the
    any-of jobs)."""
    return [(job_id, condition, state, requeues, None,
             DependencyMode.ANY.value if job_id in alts else DependencyMode.ALL.value)
            for job_id, condition, state, requeues, *_ in rows]


def _waiting_on_dependencies(ids: list[int], alts: set[int] | None) -> set[int]:
    """`waiting_among` of jobs none of which is a singleton: their dependencies only. `alts`: the
    any-of jobs among them, as the caller read them (None: the statement reads every job's mode,
    and an any-of job's met rows)."""
    if alts is not None:
        return _still_waiting_of(_with_modes(
            JobDependency.objects.filter(job_id__in=ids, satisfied_at__isnull=True).order_by()
            .values_list("job_id", "condition", "upstream__state", "upstream__requeue_count"), alts)) - _met_any(alts)
    return _still_waiting_of(
        JobDependency.objects.filter(job_id__in=ids).filter(
            Q(satisfied_at__isnull=True) | Q(job__dependency_mode=DependencyMode.ANY)).order_by()
        .values_list("job_id", "condition", "upstream__state", "upstream__requeue_count", "satisfied_at",
                     "job__dependency_mode"))


def _waiting_rows_with_singletons(ids: list[int], single: list[int], *, known: bool) -> list[tuple[Any, ...]]:
    """`waiting_among`'s one statement: the jobs' dependencies not met (`known`: the modes are
    the caller's, else each row says its job's and an any-of job's met rows come too) and a row
    for each singleton among `single` that a job of its name holds up."""
    job, dep = connection.ops.quote_name(Job._meta.db_table), connection.ops.quote_name(JobDependency._meta.db_table)
    (in_d, id_params), (in_s, single_params), (in_b, _) = (among_ids("d.job_id", ids), among_ids("s.id", single),
                                                          among_ids("b.id", ids))
    if known:
        dependency_part = (
            f"SELECT d.job_id, d.condition, u.state, u.requeue_count, NULL, '' FROM {dep} d "
            f"JOIN {job} u ON u.id = d.upstream_id WHERE d.satisfied_at IS NULL AND {in_d} ")
    else:
        dependency_part = (
            "SELECT d.job_id, d.condition, u.state, u.requeue_count, d.satisfied_at, j.dependency_mode "
            f"FROM {dep} d JOIN {job} u ON u.id = d.upstream_id JOIN {job} j ON j.id = d.job_id "
            f"WHERE (d.satisfied_at IS NULL OR j.dependency_mode = '{DependencyMode.ANY.value}') AND {in_d} ")
    sql = (
        dependency_part + "UNION ALL "
        f"SELECT s.id, '{SINGLETON}', '', 0, NULL, '' FROM {job} s WHERE s.singleton AND {in_s} AND EXISTS ("
        f"SELECT 1 FROM {job} b WHERE b.submitter_id = s.submitter_id AND b.name = s.name AND b.id <> s.id "
        "AND b.state IN (%s, %s, %s) AND (b.state IN (%s, %s) OR (b.state = %s AND (b.submitted_at < s.submitted_at "
        f"OR (b.submitted_at = s.submitted_at AND b.id < s.id))) OR ({in_b} AND NOT b.singleton)))"
    )
    params = [*id_params, *single_params, JobState.PENDING.value, JobState.RUNNING.value, JobState.PREEMPTING.value,
              JobState.RUNNING.value, JobState.PREEMPTING.value, JobState.PENDING.value, *id_params]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _met_any(job_ids: set[int]) -> set[int]:
    """Of these any-of jobs, those with an alternative met already (one query; none for none)."""
    if not job_ids:
        return set()
    return set(JobDependency.objects.filter(job_id__in=list(job_ids), satisfied_at__isnull=False)
               .values_list("job_id", flat=True))


def _still_waiting_of(rows: Iterable[tuple[Any, ...]]) -> set[int]:
    """(job, condition, upstream state, requeue count, satisfied_at, dependency_mode) rows → the
    jobs that wait: an all-of job on a row not met (and a singleton's row always), an any-of job
    while none of its rows is met (they carry its satisfied ones too)."""
    waiting: set[int] = set()
    freed: set[int] = set()
    for job_id, condition, state, requeues, satisfied_at, mode in rows:
        if condition == SINGLETON:
            waiting.add(job_id)
            continue
        met = satisfied_at is not None or is_met(condition, state, has_started=requeues > 0)
        if mode == DependencyMode.ANY:
            (freed if met else waiting).add(job_id)
        elif not met:
            waiting.add(job_id)
    return waiting - freed


def unmet_counts(job_ids: Iterable[int]) -> dict[int, int]:
    """Per job, how many of its dependencies are not met yet (one query; a job with none is absent)."""
    return dict(
        JobDependency.objects.filter(job_id__in=list(job_ids), satisfied_at__isnull=True).order_by()
        .values("job_id").annotate(n=Count("id")).values_list("job_id", "n")
    )


def waiting_rows(job_ids: Iterable[int] | None = None) -> list[tuple[Any, ...]]:
    """What waiting jobs wait on, read in one statement: (job id, upstream id, condition, the
    upstream's state, requeue count, hold, pending_resolvable, name, submitted_at, any-of), by
    job and upstream. Two kinds of row:
    - each dependency not satisfied yet of a waiting job (the caller drops those its upstream
      meets already, `is_met`, and every one of an any-of job one of whose rows it meets; name
      ""); none of an any-of job one of whose alternatives is satisfied already;
    - each job a waiting singleton waits on (condition ``singleton``, `singleton_edges`), from
      the live jobs (waiting, running, stopping) of each submitter and name that has a waiting
      singleton: the statement reads each such job once, so a job array of 1,000 singleton tasks
      is 1,000 rows, not one per pair.
    `job_ids`: only these jobs' (None: every waiting job's; an empty list: nothing, no query).
    The cycle's bind asks `waiting_among` instead (a probe per singleton, not its group)."""
    ids = None if job_ids is None else list(job_ids)
    if ids is not None and not ids:
        return []
    sql, params = _waiting_statement(ids)
    rows: list[tuple[Any, ...]] = []
    freed: set[int] = set()
    groups: dict[tuple[int, str], list[tuple[Any, ...]]] = defaultdict(list)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        for kind, job_id, upstream_id, condition, state, requeues, hold, can_run, name, at, submitter, single in (
                cursor.fetchall()):
            if kind == "d":
                rows.append((job_id, upstream_id, condition, state, requeues, hold, can_run, name, at, bool(single)))
            elif kind == "f":
                freed.add(job_id)
            else:
                groups[(submitter, name)].append((job_id, state, requeues, hold, can_run, name, at, bool(single)))
    if freed:
        rows = [r for r in rows if r[0] not in freed]
    rows += singleton_edges(groups, None if ids is None else set(ids))
    rows.sort(key=lambda r: (r[0], r[1]))
    return rows


def _waiting_statement(ids: list[int] | None) -> tuple[str, list[Any]]:
    """`waiting_rows`' statement and its parameters: a UNION ALL of the waiting jobs' unmet
    dependencies ('d'), the live jobs of each submitter and name with a waiting singleton ('g'),
    and the waiting any-of jobs one of whose alternatives is met ('f'). `ids`: only these jobs'."""
    job, dep = connection.ops.quote_name(Job._meta.db_table), connection.ops.quote_name(JobDependency._meta.db_table)
    only_d, only_s, id_params = "", "", []
    if ids is not None:
        (only_d, id_params), (only_s, _) = among_ids("j.id", ids), among_ids("s.id", ids)
        only_d, only_s = f" AND {only_d}", f" AND {only_s}"
    sql = (
        "SELECT 'd', d.job_id, d.upstream_id, d.condition, u.state, u.requeue_count, u.hold, u.pending_resolvable, "
        f"'', NULL, NULL, j.dependency_mode = '{DependencyMode.ANY.value}' FROM {dep} d JOIN {job} j ON j.id = d.job_id "
        f"JOIN {job} u ON u.id = d.upstream_id WHERE d.satisfied_at IS NULL AND j.state = %s{only_d} "
        "UNION ALL "
        "SELECT 'g', b.id, NULL, '', b.state, b.requeue_count, b.hold, b.pending_resolvable, b.name, b.submitted_at, "
        f"b.submitter_id, b.singleton FROM {job} b WHERE b.state IN (%s, %s, %s) AND EXISTS (SELECT 1 FROM {job} s "
        f"WHERE s.singleton AND s.state = %s AND s.submitter_id = b.submitter_id AND s.name = b.name{only_s}) "
        "UNION ALL "
        # each waiting any-of job one of whose alternatives is met already: it waits on none of
        # the others (the partial index of waiting any-of jobs, then their rows by job)
        f"SELECT 'f', j.id, NULL, '', '', 0, '', true, '', NULL, NULL, true FROM {job} j "
        f"WHERE j.dependency_mode = '{DependencyMode.ANY.value}' AND j.state = %s{only_d} AND EXISTS (SELECT 1 "
        f"FROM {dep} d WHERE d.job_id = j.id AND d.satisfied_at IS NOT NULL)"
    )
    params = [JobState.PENDING.value, *id_params, JobState.PENDING.value, JobState.RUNNING.value,
              JobState.PREEMPTING.value, JobState.PENDING.value, *id_params, JobState.PENDING.value, *id_params]
    return sql, params


def among_ids(column: str, ids: Sequence[int]) -> tuple[str, list[Any]]:
    """`column` among `ids`, as SQL and its parameters: one array on PostgreSQL (`= ANY(%s)`: a
    short statement, planned fast, whatever the number of ids), a list of markers on SQLite."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [list(ids)]
    return f"{column} IN ({', '.join(['%s'] * len(ids))})", list(ids)
