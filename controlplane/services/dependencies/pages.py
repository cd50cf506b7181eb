"""The read side: each job's dependencies and dependents for the API (`of_jobs`), and for the job's
page what it runs after and what waits on it (`page_of`, `singleton_page`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import Q

from controlplane.choices import DependencyCondition, DependencyMode, JobState
from controlplane.models import Job, JobDependency
from controlplane.services import access
from controlplane.services.dependencies.conditions import never_met
from controlplane.services.dependencies.singletons import shown, singleton_blockers
from controlplane.services.dependencies.words import AWAITS, state_word


def of_jobs(job_ids: Sequence[int]) -> tuple[dict[int, list[dict[str, Any]]], dict[int, list[int]]]:
    """For the API: each job's dependencies (job, condition, satisfied_at, the upstream's
    state) and the ids of the jobs that depend on it. One query for any number of jobs (none
    for none)."""
    deps: dict[int, list[dict[str, Any]]] = {pk: [] for pk in job_ids}
    dependents: dict[int, list[int]] = {pk: [] for pk in job_ids}
    if not job_ids:
        return deps, dependents
    for job_id, upstream_id, condition, satisfied_at, state in (
        JobDependency.objects.filter(Q(job_id__in=job_ids) | Q(upstream_id__in=job_ids)).order_by("job_id", "upstream_id")
        .values_list("job_id", "upstream_id", "condition", "satisfied_at", "upstream__state")
    ):
        if job_id in deps:
            deps[job_id].append({"job": upstream_id, "condition": condition, "satisfied_at": satisfied_at,
                                 "state": state})
        if upstream_id in dependents:
            dependents[upstream_id].append(job_id)
    return deps, dependents


def page_of(job_id: int, viewer: access.Access) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """For the job's page, in one query: what it runs after (each upstream job, what it waits
    for it to do in words, where it stands, when it was met) and the jobs waiting on it. A job
    of a team the viewer may not read (an admin may tie jobs of two teams) is named by its id
    only: no name, no link (`visible` False). Each job waiting on it says whether a cancel of it
    would cancel that job too (`cancelled_with_it`: waiting, all-of, on a condition a cancel
    never meets, as `settling` then decides), for the Cancel button's question."""
    runs_after: list[dict[str, Any]] = []
    waited_on_by: list[dict[str, Any]] = []
    for (dependent, upstream, condition, met_at, up_state, up_name, up_team, down_state, down_name, down_team,
         down_index, down_mode) in (
        JobDependency.objects.filter(Q(job_id=job_id) | Q(upstream_id=job_id)).order_by("job_id", "upstream_id")
        .values_list("job_id", "upstream_id", "condition", "satisfied_at", "upstream__state", "upstream__name",
                     "upstream__team_id", "job__state", "job__name", "job__team_id", "job__array_index",
                     "job__dependency_mode")
    ):
        if dependent == job_id:
            visible = viewer.may_read_team(up_team)
            runs_after.append({"job": upstream, "name": up_name if visible else "", "visible": visible,
                               "condition": condition, "awaits": AWAITS[DependencyCondition(condition)],
                               "state": state_word(up_state), "met_at": met_at})
        else:
            visible = viewer.may_read_team(down_team)
            waited_on_by.append({"job": dependent, "name": down_name if visible else "", "visible": visible,
                                 "array_index": down_index if visible else None,
                                 "condition": condition, "state": state_word(down_state), "met_at": met_at,
                                 "cancelled_with_it": (met_at is None and down_state == JobState.PENDING
                                                       and down_mode == DependencyMode.ALL
                                                       and never_met(condition, JobState.CANCELLED))})
    return runs_after, waited_on_by


def waiting_on_any_of(job_ids: Sequence[int], viewer: access.Access) -> list[dict[str, Any]]:
    """For an array's Cancel question: the jobs (not among `job_ids`) waiting on any of them that
    a cancel of them all would cancel too, by `page_of`'s `cancelled_with_it` rule (waiting,
    all-of, unmet, on a condition a cancel never meets), once each, by id, each as `page_of`
    names a job waiting on one (`job`, `name`, `visible`, `array_index`, `condition`). One query
    (none for none)."""
    if not job_ids:
        return []
    found: dict[int, dict[str, Any]] = {}
    for dependent, condition, met_at, down_state, down_name, down_team, down_index, down_mode in (
        JobDependency.objects.filter(upstream_id__in=job_ids).exclude(job_id__in=job_ids).order_by("job_id")
        .values_list("job_id", "condition", "satisfied_at", "job__state", "job__name", "job__team_id",
                     "job__array_index", "job__dependency_mode")
    ):
        if not (met_at is None and down_state == JobState.PENDING and down_mode == DependencyMode.ALL
                and never_met(condition, JobState.CANCELLED)) or dependent in found:
            continue
        visible = viewer.may_read_team(down_team)
        found[dependent] = {"job": dependent, "name": down_name if visible else "", "visible": visible,
                            "array_index": down_index if visible else None, "condition": condition}
    return list(found.values())


def singleton_page(job: Job, viewer: access.Access) -> dict[str, Any] | None:
    """For the job's page, a singleton's line of "Runs after": its name and, while it waits, the
    job of that name it waits for now (`shown`: the nearest one ahead, else those running), each
    with where it stands; a job of a team the viewer may not read by its id only. None for a job
    that is not a singleton; one query for a waiting one, none otherwise."""
    if not job.singleton:
        return None
    waits_for: list[dict[str, Any]] = []
    if job.state == JobState.PENDING:
        for b in shown(singleton_blockers(job.submitter_id, job.name, job_id=job.pk, submitted_at=job.submitted_at)):
            waits_for.append({"job": b.job_id, "visible": viewer.may_read_team(b.team_id),
                              "state": state_word(b.state)})
    return {"name": job.name, "waits_for": waits_for}
