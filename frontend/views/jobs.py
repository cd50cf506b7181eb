"""`/jobs/` (list, filters, the submit form) and `/jobs/<id>/` (one job's story).

Submitting and cancelling go through the REST API from the browser (`qm.js`), the same path
as the CLI. `/ui/jobs/check.json` answers the form's live validation: the API's own request
serializer, then the submit service's own judgement of it (services/jobs.judge: names, limits,
array, the fleet's capability, dependencies), so the form names at once every field the submit
would refuse, and says when a shape can never run on this fleet and why.
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import strip_tags
from django.utils.http import urlencode
from django.views.decorators.http import require_GET, require_POST
from rest_framework.exceptions import ValidationError

from controlplane.api import job_logs as job_logs_api
from controlplane.api.errors import flatten
from controlplane.api.serializers.job_requests import JobArraySubmitSerializer, JobSubmitSerializer
from controlplane.api.serializers.jobs import attach_gpus_held, gpus_held_expression
from controlplane.api.views.jobs import cancel_refusal, stop_notice
from controlplane.choices import FINISHED_JOB_STATES, JobHold, JobState, Topology, WorkloadClass
from controlplane.filtersets import JobFilterSet, text_filter_lengths
from controlplane.models import AllocationGpu, Event, GpuType, Job, Project
from controlplane.models.jobs import HOLD_REASON_MAX_LENGTH
from controlplane.services import (
    access,
    dependency_text,
    eta_record,
    holds,
    job_costs,
    job_history,
    job_logs,
    job_mentions,
    job_pages,
    job_priority,
    job_runs,
)
from controlplane.services import jobs as job_service
from controlplane.services.agent_protocol import RELEASE_GANG_MEMBER_EXITED, RELEASE_GANG_MEMBER_FAILED
from controlplane.services.dependencies import (
    NEVER_SATISFIED,
    jobs_named,
    page_of,
    singleton_page,
    waiting_on_any_of,
)
from controlplane.services.queue_rank_text import rank_in_line
from controlplane.services.requeue import ENDED_STATES
from controlplane.services.stopping import REQUEUEING_STOPS, attach_stop_reasons, label_totals, stop_reason
from controlplane.services.transitions import (
    ASKED_REQUEUES,
    RELEASE_REQUEUED,
    RELEASE_REQUEUED_HELD,
    RELEASE_RESIZED,
    STOP_NOTICE_KINDS,
)
from controlplane.shared_store import shared_store
from frontend import figures
from frontend.heatmap import fleet_grid
from frontend.page_filters import Refusals, query_refusals, value_refusals
from frontend.page_numbers import page_choice
from frontend.templatetags import qm
from frontend.timeline import state_segments
from frontend.views.live_json import answers_json
from scheduler_core.sentences import counted, gang_roles

PAGE_SIZE = 50
MAX_EVENTS = 1000
MAX_LIVE_ROWS = 100
#: The job page's Output panel: the last lines of one rank of one run (rank 0 of the latest by default).
OUTPUT_LINES = 200
#: A preempting job may be cancelled too: its requeueing stop becomes a cancel (the API answers
#: 409 with the reason when the stop already ends the job, e.g. at its runtime limit).
CANCELLABLE = (JobState.PENDING, JobState.RUNNING, JobState.PREEMPTING)
#: The sorts the list's form offers: the API's `ordering` values (JobFilterSet), in words.
SORTS = (
    ("", "newest first"), ("queue_position", "queue order"), ("-priority", "highest priority"),
    ("-gpus", "most GPUs"), ("gpus", "fewest GPUs"), ("submitted_at", "oldest first"), ("name", "name"),
    ("state", "state"),
)


# --------------------------------------------------------------------------------- the list


def _submit_choices(request: HttpRequest) -> dict[str, Any]:
    """What the submit form offers: the teams the user may submit for, their projects, the
    priority classes, the GPU types of the fleet."""
    teams = list(access.member_teams(request.user).select_related("default_priority_class").order_by("name"))
    projects = list(Project.objects.filter(team__in=teams).order_by("team__name", "name").values("team__name", "name"))
    return {
        "submit_teams": teams,
        "default_team": access.primary_team(request.user),
        "submit_projects": projects,
        # each with the teams of the form it is for (qm.js offers a team's own when it is picked)
        "priority_classes": job_service.classes_offered(access.access_of(request.user), teams),
        "gpu_types": list(GpuType.objects.order_by("name")),
        "topologies": Topology.choices,
        "workloads": WorkloadClass.choices,
    }


def _job_teams(user: Any) -> list[str]:
    """The teams whose jobs the user may read, for the team filter."""
    return list(access.member_teams(user).order_by("name").values_list("name", flat=True))


#: The live update's own parameters, beside the list's filters, sort and page.
LIVE_PARAMS = ("ids", "after")


def _list_params(request: HttpRequest, *without: str) -> QueryDict:
    """The list's own parameters (its filters, sort and page) as the request gives them: a copy
    without the live update's (`LIVE_PARAMS`), nor the names in `without`."""
    params = request.GET.copy()
    for name in (*LIVE_PARAMS, *without):
        params.pop(name, None)
    return params


def _listed(request: HttpRequest, *, live: bool = False
            ) -> tuple[JobFilterSet, QuerySet[Job], str, Refusals]:
    """The list as the request filters and sorts it (the page and its live update read it so):
    the filterset, the rows in their order, the `ordering` asked for ("" newest first), and the
    errors naming each parameter refused ({} for none): one the page does not take or one
    taking one value given twice, as the API and the other listing pages refuse them
    (page_filters.query_refusals), else a filter's bad value. The live update takes its own
    (`LIVE_PARAMS`) besides."""
    # `place`: a waiting job's queue position, ETA and the numbers of its reason.
    jobs = access.visible_jobs(request.user).select_related("team", "priority_class", "project", "submitter",
                                                             "place")
    params = _list_params(request)
    # the form's times are UTC without a zone (its datetime-local inputs carry none)
    filterset = JobFilterSet(params or None, queryset=jobs, request=request, naive_times_are_utc=True)
    errors = query_refusals(params if live else request.GET, JobFilterSet)
    if not errors and filterset.is_bound and not filterset.is_valid():
        errors = value_refusals(filterset)
    # A refused query lists nothing, as the history page does: the whole list under the error
    # line read as its answer.
    rows = jobs.none() if errors else filterset.qs if filterset.is_bound else jobs
    # `?ordering=` sorts as the API does (the filterset's own ordering); newest first otherwise.
    ordering = request.GET.get("ordering", "") if filterset.is_bound and not errors else ""
    if not ordering:
        rows = rows.order_by("-submitted_at", "-id")
    return filterset, rows, ordering, errors


def _with_their_rows(rows: QuerySet[Job], ids: list[int]) -> list[Job]:
    """The jobs of `ids` as the list's rows show them, in that order: the GPUs each holds now
    (an elastic job's may differ from its request) and the teams of the jobs their reasons name
    (said by team when not the reader's), one query each."""
    listed = job_pages.jobs_of_page(rows, ids)  # sorted ids, then their rows
    attach_gpus_held(listed)
    job_mentions.prefetch(job.pending_message for job in listed)
    return listed


@login_required
@require_GET
def job_list(request: HttpRequest) -> HttpResponse:
    user = request.user
    jobs = access.visible_jobs(user)
    # Read before the list, so that a job submitted while it is read is told by the live update.
    seen = job_pages.newest_id()
    filterset, rows, ordering, errors = _listed(request)
    filtered = filterset.is_bound and not errors
    page, page_error = page_choice(Paginator(job_pages.ids_in_order(rows), PAGE_SIZE), request.GET.get("page"))
    page.object_list = _with_their_rows(rows, page.object_list)
    array_id = request.GET.get("array_id") if filtered else None
    array_summary: dict[str, Any] = {}
    array_limit = array_actions = None
    if array_id:
        array_summary = _array_summary(jobs, array_id)
        # Slurm's %N: every task carries the array's limit (PATCH job-arrays/{id}/ sets them all).
        array_limit = jobs.filter(array_id=array_id).values_list("array_task_limit", flat=True).first()
        array_actions = _array_actions(request, array_id)
    ids = [job.pk for job in page.object_list][:MAX_LIVE_ROWS]
    # The live update re-reads this list (its filters, sort and page) for the rows shown and the
    # jobs submitted after `seen`; a refused filter lists nothing to keep up.
    live = _list_params(request)
    query = _list_params(request, "page")
    context: dict[str, Any] = {
        "page": "jobs",
        "jobs": page,
        "filters": filterset.form,
        "filter_lengths": text_filter_lengths(JobFilterSet),  # each text filter's maxlength: the server's
        "filter_errors": errors,
        "query": query.urlencode(),
        "states": JobState.choices,
        "orderings": SORTS,
        "ordering": ordering,
        "chosen_states": request.GET.getlist("state"),
        "visible_teams": _job_teams(user),
        "array_id": array_id,
        **array_summary,
        "array_limit": array_limit,
        "array_actions": array_actions,
        "may_submit": access.may_submit(user),
        "live_url": "" if errors else
                    reverse("frontend:jobs-json") + (f"?{live.urlencode()}" if live else ""),
        "live_extra": urlencode({"ids": ",".join(map(str, ids)), "after": seen}),
        "page_size": PAGE_SIZE,
        "page_error": page_error,
        "news_in_place": job_pages.news_in_place(ordering, page.number),
        "job_url": reverse("v1:job-list"),
        "array_url": reverse("v1:job-array-list"),
        "check_url": reverse("frontend:job-check"),
    }
    if context["may_submit"]:
        context.update(_submit_choices(request))
    # 400 as the history page and the API answer a refused filter or parameter
    return render(request, "frontend/jobs.html", context, status=400 if errors else 200)


def _array_summary(jobs: QuerySet[Job], array_id: str) -> dict[str, Any]:
    """The array summary's counts: its tasks per state (state, state_label, n: a stopping task
    counted by why it stops) and how many of the waiting ones are held (out of the queue until
    released, which "Pending 8" alone did not say). Two queries, three when one stops."""
    tasks = jobs.filter(array_id=array_id)
    return {"array_states": label_totals(tasks),
            "array_held": holds.held_waiting(tasks)}  # the API's `held`


def _array_actions(request: HttpRequest, array_id: str) -> dict[str, str] | None:
    """The array summary's buttons (`scancel ARRAY`, `scontrol hold/release ARRAY`: the API's
    job-arrays actions), for a reader who may act on its team's jobs as the API lets them: its
    name and the actions' URLs. None for a reader who may not (finance, another team), an
    array not theirs to see, or one whose tasks have all ended: nothing is left to hold, release
    or cancel, as an ended job's page offers no Cancel (its buttons answered "0 cancelled").
    Three queries (its first task, its tasks not ended, the jobs waiting on them)."""
    tasks = access.visible_jobs(request.user).filter(array_id=array_id)
    first = tasks.order_by("array_index", "pk").values("name", "team_id").first()
    who = access.access_of(request.user)
    if first is None or not who.may_submit_for(first["team_id"]):
        return None
    not_ended = list(tasks.exclude(state__in=FINISHED_JOB_STATES).values_list("pk", flat=True))
    if not not_ended:
        return None
    # the jobs waiting on its tasks that its cancel takes with it, named, as a job's Cancel names them
    taken = waiting_on_any_of(not_ended, who)
    return {"name": first["name"], "cancel_taken": taken_said(taken, "its tasks"),
            "reason_max_length": HOLD_REASON_MAX_LENGTH,  # the hold box: what the API takes
            **{f"{verb}_url": reverse(f"v1:job-array-{verb}", args=[array_id]) for verb in ("hold", "release", "cancel")}}


def _is_job_id(text: str) -> bool:
    """`text` is a job id as the table holds one: digits, below 2^63 (a bigint)."""
    return text.isdigit() and text.isascii() and int(text) < 2**63


@login_required
@answers_json
@require_GET
def job_list_json(request: HttpRequest) -> JsonResponse:
    """The list's live update: the state cells and ages of the listed jobs (`ids`), re-rendered;
    and, given `after` (the newest job id the page has seen), the list re-read under the page's
    filters, sort and page: its count, and the jobs submitted since, as rows for the top of the
    first page newest first, else as a notice saying how many and where they are
    (services/job_pages.news_in_place says which, and why)."""
    parts = [part for part in request.GET.get("ids", "").split(",") if part]
    if not all(map(_is_job_id, parts)):
        # an id past the table's bigint was a 500 (SQLite's OverflowError, PostgreSQL's DataError)
        return JsonResponse({"detail": "ids: expected comma-separated job ids",
                             "errors": {"ids": ["not job ids (whole numbers from 0 to 2^63 - 1)"]}}, status=400)
    ids = [int(part) for part in parts][:MAX_LIVE_ROWS]
    after = request.GET.get("after")
    if after is not None and not _is_job_id(after):
        return JsonResponse({"detail": "after: expected a job id",
                             "errors": {"after": ["not a job id (a whole number from 0 to 2^63 - 1)"]}}, status=400)
    jobs = access.visible_jobs(request.user).filter(pk__in=ids).select_related("place").only(
        "id", "state", "hold", "pending_code", "pending_words", "would_start_if_words", "team_id",
        "place__queue_position", "place__eta",
        "place__numbers", "submitted_at",
    )
    jobs = list(jobs)
    job_mentions.prefetch(job.pending_message for job in jobs)
    attach_stop_reasons(jobs)  # a stopping job's badge says why (one query, none without one)
    body: dict[str, Any] = {
        "html": {f"job-state-{job.pk}": render_to_string("frontend/_job_state_cell.html", {"job": job})
                 for job in jobs},
        # ages advance ("42 s ago"): written only where the words changed (qm.js)
        "text": {f"job-age-{job.pk}": qm.age(job.submitted_at) for job in jobs},
    }
    if after is not None:
        news = _list_news(request, int(after), [job.pk for job in jobs])
        body["html"].update(news.pop("html", {}))
        body.update(news)
    return JsonResponse(body)


def _list_news(request: HttpRequest, after: int, shown: list[int]) -> dict[str, Any]:
    """The list re-read for its live update: the count line, the links to its pages, the jobs
    submitted after `after` (rows, or a notice), and which of the rows `shown` no longer match
    its filters (`left`: a job listed as pending that started; qm.js marks their rows, which stay
    where they are until a reload, as a new job's rows stay out of a list sorted otherwise), with
    the sentence a screen reader hears."""
    filterset, rows, ordering, errors = _listed(request, live=True)
    if errors:
        return {}  # the page lists nothing for a refused query: nothing to keep up
    # Only a filtered list loses rows this way (every job the reader may see is in the unfiltered
    # one): one query then, none otherwise.
    matching = set(rows.filter(pk__in=shown).order_by().values_list("pk", flat=True)) \
        if filterset.is_bound and shown else set(shown)
    left = [pk for pk in shown if pk not in matching]
    # the page the list shows, its notice said there (job_list)
    page, _ = page_choice(Paginator(job_pages.ids_in_order(rows), PAGE_SIZE), request.GET.get("page"))
    news = job_pages.news(rows, after, in_place=job_pages.news_in_place(ordering, page.number), limit=PAGE_SIZE)
    query = _list_params(request, "page")
    context = {"jobs": page, "ordering": ordering, "query": query.urlencode(), "news": news}
    html = {"jobs-count": render_to_string("frontend/_jobs_count.html", context),
            "jobs-pages": render_to_string("frontend/_jobs_pages.html", context),
            "jobs-new": render_to_string("frontend/_jobs_new.html", context)}
    array_id = request.GET.get("array_id")
    if array_id:  # the array summary's counts follow its tasks (a cancel from its buttons, the scheduler)
        html["array-summary"] = render_to_string("frontend/_array_summary.html",
                                                 _array_summary(access.visible_jobs(request.user), array_id))
    new_rows = _with_their_rows(rows, news.ids) if news.ids else []
    if news.in_place:
        said = "; ".join(f"job {job.pk} {job.name}" for job in new_rows)
        said = f"New in this list: {said}." if said else ""
    else:
        said = " ".join(strip_tags(html["jobs-new"]).split())  # the notice's own words
    if left:
        gone = f"No longer matching this list's filters: {_jobs_said(left)} (left in place until a reload)."
        said = f"{said} {gone}" if said else gone
    return {"html": html, "after": news.seen, "said": said, "left": left,
            "rows": [render_to_string("frontend/_job_row.html", {"job": job}, request=request) for job in new_rows]}


def _jobs_said(ids: list[int]) -> str:
    """"job 12", "jobs 12 and 14", "jobs 12, 14 and 15"."""
    named = [str(pk) for pk in ids]
    if len(named) == 1:
        return f"job {named[0]}"
    return f"jobs {', '.join(named[:-1])} and {named[-1]}"


# ------------------------------------------------------------------------------ live checks


def _refusal(detail: str, errors: dict[str, list[str]], status: int = 400) -> JsonResponse:
    return JsonResponse({"detail": detail, "code": "invalid", "errors": errors}, status=status)


def _verdict(runs: bool, detail: str, errors: dict[str, list[str]] | None = None, tasks: int = 1,
             never_under_quota: str | None = None, never_runs: str | None = None) -> JsonResponse:
    return JsonResponse({"runs": runs, "detail": detail, "errors": errors or {}, "tasks": tasks,
                         "never_under_quota": never_under_quota, "never_runs": never_runs})


@login_required
@answers_json
@require_POST
def check_json(request: HttpRequest) -> JsonResponse:
    """Could this request run on this fleet, and would the submit take it? Always 200 with a
    verdict (`runs`, a sentence, the fields at fault) for a JSON object, since the check itself
    succeeded whatever its answer; 400 only when the body is not a JSON object, 403 for accounts
    that may not submit. The verdict is the submit's own judgement (the API's serializer, then
    services/jobs.judge, which writes and locks nothing): every field at fault at once, in the
    words the submit's 400 would use. It used to stop at the first stage that failed (the
    fields, the array, the shape, the dependencies) and left team, class, project and runtime
    limit to the submit."""
    if not access.may_submit(request.user):
        return _refusal("Finance accounts read costs; they cannot submit jobs.", {}, status=403)
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return _refusal("The body is not JSON.", {"non_field_errors": ["expected a JSON object"]})
    if not isinstance(body, dict):
        return _refusal("The body is not a JSON object.", {"non_field_errors": ["expected a JSON object"]})
    serializer = (JobArraySubmitSerializer if "array" in body else JobSubmitSerializer)(data=body)
    if serializer.is_valid():
        req = serializer.to_submit_request()  # an array request carries its `array` spec
        judged: job_service.Judgement | None = job_service.judge(request.user, req, quota=True)
        errors = {name: [problem] for name, problem in judged.errors.items()}
    else:
        req = None
        said, judged = serializer.judged_with_the_rest(request.user)
        errors = flatten(said)
    tasks = len(judged.array_indices) if judged is not None and judged.array_indices is not None else 1
    if errors or req is None:
        # `never_runs`: the field whose shape this fleet can never run, which the page's sentence
        # (in the form's labels) says first, as `detail` does in the API's field names.
        never_runs = judged.never_runs if judged is not None and judged.never_runs in errors else None
        return _verdict(False, _faults(errors, never_runs), errors, tasks, never_runs=never_runs)
    what = f"{req.gpus} GPU{'s' if req.gpus != 1 else ''}" + (
        f", {req.gpus_per_node} per node" if req.gpus_per_node else "")
    if req.gpu_types:
        what += f" of {' or '.join(req.gpu_types)}"
    if req.roles:  # a heterogeneous gang: what each role gets
        what += f" as roles {gang_roles(req.roles)}"
    if tasks > 1:
        limit = judged.array_task_limit if judged is not None else None
        what = f"{tasks} tasks of {what}" + (f", at most {limit} at a time" if limit else "")
    never = judged.never_under_quota if judged is not None else None
    if never is not None:
        # The submit takes it (an admin may raise the quota), but it would wait for ever as it is:
        # said before the Submit, not only once the job waits as CanNeverRun.
        return _verdict(True, f"This fleet can run {what}, but as asked it would never start. {never} The submit "
                              "would take it, to wait until an admin raises the quota; to run it, ask for fewer "
                              "GPUs.", tasks=tasks, never_under_quota=never)
    return _verdict(True, f"This fleet can run {what}. The submit would take it: its team, priority class, project, "
                          "limits and dependencies are judged as the submit judges them.", tasks=tasks)


def _faults(errors: dict[str, list[str]], never_runs: str | None) -> str:
    """The verdict's sentence for a request the submit would refuse: every field at fault, the
    fleet's capability first when it is among them (the shape can never run here)."""
    rest = "; ".join(f"{name}: {' '.join(problems)}" for name, problems in errors.items() if name != never_runs)
    if never_runs is None or never_runs not in errors:
        return "Fix the fields marked: " + rest
    said = f"This job can never run on this fleet: {' '.join(errors[never_runs])}."
    return said + (f" Fix the other fields marked too: {rest}" if rest else "")


# ---------------------------------------------------------------------------------- one job


def _visible_job(request: HttpRequest, job_id: int) -> Job:
    """The job if the user may read it; otherwise 404, so another team's job does not leak."""
    job = (access.visible_jobs(request.user).select_related("team", "project", "priority_class", "submitter", "place",
                                                            "held_by")
           .annotate(gpus_held=gpus_held_expression()).filter(pk=job_id).first())
    if job is None:
        raise Http404("No such job, or not yours to see.")
    return job


#: The heading of a stopping job's notice, by the kind of the event that stopped it (a
#: preemption's notice is the "Being preempted" panel of its last preemption instead).
STOP_TITLES = {"job.cancelled": "Being cancelled", "job.timed_out": "Stopping at its runtime limit"}
#: ... and of a stop someone asked for to requeue the job (POST jobs/{id}/requeue/), by its reason.
REQUEUE_TITLES = {RELEASE_REQUEUED: "Being requeued", RELEASE_REQUEUED_HELD: "Being requeued, to come back held"}
#: ... and of every stop that is no preemption (a `job.stopping` notice, or an old `job.preempting`
#: one with such a reason), by its reason: no resize or gang member's exit reads "Being preempted".
OTHER_STOP_TITLES = {**REQUEUE_TITLES, RELEASE_RESIZED: "Stopping to resize",
                     RELEASE_GANG_MEMBER_EXITED: "Stopping: a gang member exited",
                     RELEASE_GANG_MEMBER_FAILED: "Stopping: a gang member failed"}

#: Events that end a run the job did not choose to end: it goes back to the queue whole.
REQUEUE_KINDS = ("job.preempted", "job.requeued", "job.resized")


def last_preemption(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The job's latest preemption, from its events (oldest first): the signal (`job.preempting`,
    or `job.stopping` for a resize or a requeue asked for: why, and the deadline to checkpoint
    and exit) and, once its processes are gone, the requeue (what was lost). None for a job never
    stopped so. The page heads it by what it was (a requeue asked for, a resize, a fence, a
    preemption); events stored before migration 0032 noticed every such stop as `job.preempting`,
    and read the same by their reason."""
    signal = requeue = None
    for e in events:
        if e["kind"] in STOP_NOTICE_KINDS and e["reason"] in REQUEUEING_STOPS:  # not a gang member's exit
            signal, requeue = e, None
        elif e["kind"] in REQUEUE_KINDS:
            requeue = e
            if signal is not None and signal["created_at"] > e["created_at"]:
                signal = None
    if signal is None and requeue is None:
        return None
    deadline = None
    if signal is not None and (signal.get("data") or {}).get("deadline"):
        deadline = datetime.fromisoformat(signal["data"]["deadline"])
    # A requeue someone asked for (its notice and its requeue carry the request's reason).
    last = requeue or signal
    asked = last is not None and last.get("reason") in ASKED_REQUEUES
    return {"signal": signal, "requeue": requeue, "deadline": deadline, "asked": asked,
            "at": (signal or requeue or {}).get("created_at")}


def job_payload(request: HttpRequest, job: Job) -> dict[str, Any]:
    """Everything the job page shows besides the job row itself, in a fixed number of queries."""
    now = timezone.now()
    events = list(
        Event.objects.filter(job=job).order_by("created_at", "id")
        .values("created_at", "kind", "reason", "message", "actor", "data")[:MAX_EVENTS]
    )
    job_mentions.prefetch([e["message"] for e in events] + [job.pending_message, job.pending_would_start_if])
    segments = state_segments(events, current_state=job.state)
    node_ids = list(
        AllocationGpu.objects.filter(allocation__job=job, live=True).values_list("node_id", flat=True).distinct()
    )
    grid = fleet_grid(request.user, node_ids=node_ids) if node_ids else []
    placement = figures.fleet_heatmap(
        grid, key="placement", highlight_job=job.pk, title="Where it runs",
        caption="The nodes holding this job's GPUs: its own slots in red, other jobs' slots by team, free slots pale.",
    )
    ended = job.state in ENDED_STATES
    if not grid:
        placement = figures.Chart(
            "placement", "Where it runs", placement.caption, placement.figure,
            # An ended job runs no more (unless requeued): it says where it ran, not "while it runs".
            empty=("This job has ended and holds no GPUs; where each of its runs ran is under Runs." if ended else
                   "This job holds no GPUs now. While it runs, its GPUs appear here on the nodes' heat map."),
        )
    array_states = None
    if job.array_id:  # (state, state_label, n), as the list's array summary
        array_states = label_totals(access.visible_jobs(request.user).filter(array_id=job.array_id))
    who = access.access_of(request.user)
    # A stopping job says what stopped it last, in the API's words (`qm explain`): a cancel or
    # its runtime limit read as "Stopping: its processes were signalled", and a job preempted
    # once, run again and cancelled said "Being preempted" with the old preemption's words.
    stop_kind, stop_text = stop_notice(job) if job.state == JobState.PREEMPTING else ("", "")
    # A stop that is no preemption (a requeue someone asked for, a resize, a gang member's exit:
    # its notice a job.stopping, an old job.preempting read so by its reason) is said as what it is;
    # a preemption is said by the panel of its last preemption ("Being preempted").
    other = stop_reason(job) if stop_kind == "job.stopping" else ""
    runs_after, waited_on_by = page_of(job.pk, access.access_of(request.user))  # both ways: one query
    runs = job_runs_panel(job, now, request.GET)
    return {
        "job": job,
        "preemption": last_preemption(events),
        "stopping": {"title": OTHER_STOP_TITLES.get(other) or STOP_TITLES.get(stop_kind, "Stopping"), "text": stop_text}
        if stop_text and stop_kind != "job.preempting" else None,
        # Its active and productive GPU-hours and lost work as accounting rolled them up; its
        # cost and allocated GPU-hours to now, one figure each: its runs priced and added up by
        # the rollup's rule (the Runs panel's total, the API's total_cost_usd, the history's
        # Cost), what showback charges it once the rollup has caught up. The page said the
        # rollup's cost beside the runs' (a few seconds behind: two numbers), and until 7 Dec the
        # rollup's GPU-hours (0.03) above runs each rounded on its own (0.01 + 0.01).
        "cost": job_costs.job_cost(job.pk),
        "runs_to_now": job_runs_to_now(job, now, runs),
        "events": events[::-1][:200],
        "event_count": len(events),
        "charts": [figures.job_timeline(segments, events, now=now), placement],
        "gpus_held": job.gpus_held,  # annotated by _visible_job: the API's count
        "nodes": [r.name for r in grid],
        "array_states": array_states,
        "roles": gang_roles(job.roles) if job.roles else "",  # a heterogeneous gang's
        "env": sorted((job.env or {}).items()),  # NAME=value, as submitted (the API's `env`)
        "runs_after": runs_after, "waited_on_by": waited_on_by,  # its dependencies, both ways
        "runs_after_any": job.dependency_mode == "any" and len(runs_after) > 1,  # Slurm's `?`: any one of them
        "singleton": singleton_page(job, who),  # Slurm's singleton: the job of its name it waits for
        "dependency_cancelled": job.state == JobState.CANCELLED and job.pending_code == NEVER_SATISFIED,
        # Not where the API would refuse it (409): a job already being cancelled, or stopping at its limit.
        "may_cancel": job.state in CANCELLABLE and who.may_submit_for(job.team_id) and cancel_refusal(job) is None,
        "cancel_url": reverse("v1:job-cancel", args=[job.pk]),
        "cancel_question": cancel_question(job, waited_on_by),
        # Hold and release where the API allows them (services/holds.py): a waiting job of the
        # user's team; an admin's hold is released only by an admin.
        "may_hold": job.state == JobState.PENDING and not job.hold and who.may_submit_for(job.team_id),
        "may_release": (job.state == JobState.PENDING and bool(job.hold) and who.may_submit_for(job.team_id)
                        and (job.hold != JobHold.ADMIN or who.is_admin)),
        "hold_url": reverse("v1:job-hold", args=[job.pk]),
        # Requeue where the API allows it (services/requeue.py): a running or ended job of the
        # user's team (an ended one may still be refused: a dependency never met, ...; the API says why).
        "may_requeue": job.state in (JobState.RUNNING, *ENDED_STATES) and who.may_submit_for(job.team_id),
        "requeue_ended": ended,
        "ended": ended,  # its figures are final: "Cost", not "Cost so far"
        "requeue_url": reverse("v1:job-requeue", args=[job.pk]),
        "release_url": reverse("v1:job-release", args=[job.pk]),
        "reason_max_length": HOLD_REASON_MAX_LENGTH,  # the hold and requeue boxes take what the API takes
        "output": job_output(job, request.GET),
        **runs,
        # beside a waiting job's ETA, how far the ETAs told held lately; once it started, its own
        **eta_lately(job, now),
        "queue_place": queue_place(request, job),  # what places a job in line there, as `qm sprio`
        "eta_told_gap": eta_told_gap(job),
        "now": now,
    }


def cancel_question(job: Job, waited_on_by: list[dict[str, Any]]) -> str:
    """The Cancel button's question: the job, and the jobs waiting on it that the cancel takes
    with it (their dependency never to be met: `page_of`'s `cancelled_with_it`), named, as the
    API's answer names those it took; a researcher heard of them only afterwards, if at all."""
    return f"Cancel job {job.pk} ({job.name})?" + taken_said([d for d in waited_on_by if d["cancelled_with_it"]], "it")


def taken_said(taken: list[dict[str, Any]], on: str) -> str:
    """The jobs a cancel would take with it (waiting on `on`: "it", "its tasks"), named, for a
    Cancel button's question: a job's, an array's. "" for none."""
    if not taken:
        return ""
    listed = jobs_named([(d["job"], d["name"] if d["visible"] else None, d["array_index"]) for d in taken])
    one = len(taken) == 1
    conditions = ", ".join(sorted({d["condition"] for d in taken}))
    return (f" {counted(len(taken), 'job')} waiting on {on} ({conditions}) {'is' if one else 'are'} "
            f"cancelled with {'it' if on == 'it' else 'them'}, {'its' if one else 'their'} dependency never to be "
            f"met, and so is any job waiting on {'it' if one else 'them'}: {listed}.")


def job_runs_to_now(job: Job, now: datetime, runs: dict[str, Any]) -> job_costs.RunCosts:
    """What the job's runs have cost and held up to `now`, priced as showback prices them and
    their GPU-hours added up as their rows say them (`job_costs.run_costs`): the Runs panel's when
    the panel priced them (a panel refusing its `runs_before` priced none); none for a job that
    never ran."""
    if runs.get("run_costs") is not None:
        return runs["run_costs"]  # type: ignore[no-any-return]
    if not job_history.may_have_run(job):
        return job_costs.RunCosts(usd={}, total_usd=Decimal("0.00"))
    return job_costs.run_costs(job.pk, now)


def eta_lately(job: Job, now: datetime) -> dict[str, Any]:
    """Beside a waiting job's ETA: the fleet's ETA record, the record of the job's size class,
    and where its start lands if it has the median share of its wait that jobs of its class had
    lately, or why there is none (services/eta_record.py eta_lately: the record `qm explain`
    reads, kept a minute in the shared store)."""
    if job.state != JobState.PENDING or job.eta is None:
        return {"eta_record": None, "eta_class": None, "eta_likely": None, "eta_missing": None, "eta_first": None}
    first = eta_record.first_eta_of(job, now)
    record, own, likely, missing = eta_record.eta_lately(job.gpus, job.eta, first, now)
    return {"eta_record": record, "eta_class": own, "eta_likely": likely, "eta_missing": missing,
            "eta_likely_passed": likely is not None and likely <= now, "eta_first": first,
            "eta_first_late_s": first.late_s(now) if first is not None else 0.0,
            "eta_min_judged": eta_record.MIN_JUDGED_FOR_LIKELY}


#: How long the job page reuses the next cycle's queue order (a read of the fleet as a cycle reads
#: it and the engine's ordering), shared by every page view: a waiting job's page refreshes every 5 s.
QUEUE_ORDER_TTL_S = 5
QUEUE_ORDER_KEY = "qm:queue-order"


def queue_place(request: HttpRequest, job: Job) -> dict[str, Any] | None:
    """A waiting job in line: its effective priority and its parts, its team's dominant share
    and its place among every job in line, as `qm sprio` and `GET jobs/priority/?job=` give them
    (services/job_priority.py, kept to what the viewer may see as there). None for a job not
    waiting or held (not in line: no read), or one the order does not hold (waiting for a
    dependency)."""
    if job.state != JobState.PENDING or job.hold:
        return None
    got = job_priority.priorities(request.user, [job.pk], order=fleet_queue_order())
    if not got.jobs:
        return None
    row = got.jobs[0]
    # the numbers as `qm explain` and `qm sprio` print them (502, not 502.0; 2.5 points, not 2.50)
    # The runtime limit and the rule for equals: a later job of equal priority and share with a
    # shorter limit goes first, which the priority and share alone left unexplained.
    limit = row["runtime_limit_s"]
    return {**row, "in_line": got.in_line, "at": got.at, "effective_text": f"{row['effective_priority']:g}",
            "class_text": f"{row['class_value']:g}", "aging_text": f"{row['aging_points']:g}" if row["aging_points"] else "",
            "limit_text": f"runtime limit {qm.span(limit)}" if limit else "no runtime limit",
            # its rank in the words `qm explain` says it: by priority alone, of a job that can never run
            "rank_text": rank_in_line(row["order"], got.in_line, can_run=job.pending_resolvable,
                                      never_ahead=row["never_ahead"]),
            "rule": job_priority.AMONG_EQUALS.get(got.queue_order, "")}


def fleet_queue_order() -> job_priority.QueueOrder:
    """The next cycle's queue order (job ids and numbers, no names), shared by every page view
    for QUEUE_ORDER_TTL_S."""
    store = shared_store()
    order: job_priority.QueueOrder | None = store.get(QUEUE_ORDER_KEY)
    if order is None:
        order = job_priority.queue_order()
        store.set(QUEUE_ORDER_KEY, order, QUEUE_ORDER_TTL_S)
    return order


def eta_told_gap(job: Job) -> dict[str, Any] | None:
    """How much sooner (or later) than the first ETA it was told a started job started."""
    gap = eta_record.started_against_told(job)
    if gap is None:
        return None
    return {"late": gap > eta_record.SLACK_S, "by_s": abs(gap)}


#: The runs the job page lists at once (the latest, or with `?runs_before=N` the ones before run
#: N); the panel links to the older and newer ones, and the API and `qm runs` page through them all.
MAX_RUNS_SHOWN = 50
RUNS_BEFORE = "runs_before"


def job_runs_panel(job: Job, now: datetime, params: Any = None) -> dict[str, Any]:
    """The Runs panel: the job's latest runs, or with `?runs_before=N` the ones before run N,
    oldest of them first (services/job_runs.py), numbered as the whole list; how many it has;
    what they cost (`job_costs.run_costs`: all of them, so the page's cents are the API's and
    add up to the total); the links to older and newer runs. A bad `runs_before` (not a whole
    number, no run before it, past the job's runs) is said in `runs_error`, naming it, as the
    API's 400 names a bad `offset`. Six queries; none for a job that never ran."""
    params = params if params is not None else {}
    raw = str(params.get(RUNS_BEFORE, "")).strip()
    before: int | None = None
    if raw:
        digits = raw.lstrip("0") or "0"
        if not raw.isascii() or not raw.isdigit() or (len(digits) <= 18 and int(digits) < 2):
            return _runs_error(job, raw, f"'{raw[:40]}' is not a run number of at least 2 (the runs before it are "
                                         "listed).")
        # A number of more digits is past any job's runs (and not one to read into an int).
        before = int(digits) if len(digits) <= 18 else job_runs.PAST_EVERY_RUN
    if not job_history.may_have_run(job):
        if before is not None:
            return _runs_error(job, raw, f"Job {job.pk} has no runs: there is no run {digits[:40]}.")
        return {"runs": [], "run_count": 0, "runs_cost": None}
    if before is None:
        allocations, total = job_runs.latest_runs(job, MAX_RUNS_SHOWN)
        first = total - len(allocations) + 1
    else:
        allocations, total = job_runs.runs_before(job, before, MAX_RUNS_SHOWN)
        if before > total + 1:
            return _runs_error(job, raw, f"Job {job.pk} has {total} run{'' if total == 1 else 's'}: there is no "
                                         f"run {digits[:40]}.")
        first = max(1, before - MAX_RUNS_SHOWN)
    costs = job_costs.run_costs(job.pk, now)
    last = first + len(allocations) - 1
    return {
        "runs": job_runs.describe(job, allocations, first=first, now=now, costs=costs),
        "run_count": total, "runs_cost": costs.total_usd, "run_costs": costs, "runs_before": before if last < total else None,
        "runs_first": first, "runs_last": last,
        # The links: the page before these runs; the page after them (None: the latest, the panel's default).
        "older_runs": first if first > 1 else None,
        "newer_runs": last + 1 + MAX_RUNS_SHOWN if last + MAX_RUNS_SHOWN < total else None,
    }


def _runs_error(job: Job, raw: str, message: str) -> dict[str, Any]:
    return {"runs": [], "run_count": 0, "runs_cost": None, "runs_error": f"Cannot list those runs: {RUNS_BEFORE}: "
            f"{message}", "runs_errors": {RUNS_BEFORE: [message]}}


def job_output(job: Job, params: Any = None) -> dict[str, Any]:
    """The Output panel: the last OUTPUT_LINES lines of one rank of one run (`?rank=` and
    `?generation=` as the API reads them; by default rank 0 of the latest run, followed into
    the next run), the runs and the ranks with output to choose from, and the link to all of
    that rank's output kept, as plain text (the API's ?format=txt). A bad choice is said in
    `error`, naming the parameter as the API's 400 does. The template escapes the text: job
    output is shown, never read as HTML."""
    params = params if params is not None else {}
    chosen = {name: str(params.get(name, "")) for name in ("generation", "rank") if params.get(name, "") != ""}
    try:
        rank, generation = job_logs_api.rank_and_generation(params)
        output = job_logs.read(job, rank=rank, generation=generation, tail_lines=OUTPUT_LINES)
    except ValidationError as error:
        return _output_error(job, chosen, flatten(error.detail))
    except job_logs.BadRead as error:
        return _output_error(job, chosen, error.errors)
    raw = None
    if output.generation is not None:
        raw = reverse("v1:job-logs", args=[job.pk]) + "?" + urlencode(
            {"format": "txt", "generation": output.generation, "rank": rank, "tail_bytes": job_logs.keep_bytes()})
    runs = output.generations
    # "1 rank wrote output" of a 32-GPU gang read as 31 ranks' output lost: said of how many
    # (one query, only when some rank wrote).
    world = job_logs.world_size(job, output.generation) if output.ranks and output.generation is not None else None
    return {"text": output.text, "notice": output.notice, "generation": output.generation,
            "run": runs.index(output.generation) + 1 if output.generation in runs else None,
            "generations": len(runs), "runs": runs[::-1], "run_choices": _run_choices(runs), "rank": rank,
            "ranks": output.ranks, "world_size": world,
            "rank_choices": sorted({*output.ranks, rank}), "follows_latest": generation is None,
            "node": output.node, "end_offset": output.end_offset, "lines": OUTPUT_LINES, "raw_url": raw,
            "chosen": chosen, "error": ""}


def _run_choices(generations: list[int]) -> list[tuple[int, int]]:
    """The Run select's choices, newest first: (the run's number in the job, its lease
    generation). The generation is the fleet-wide fencing token `?generation=` and `qm logs
    --generation` take; said alone ("generation 25") it read as the job's 25th run."""
    return [(number, generation) for number, generation in enumerate(generations, start=1)][::-1]


def _output_error(job: Job, chosen: dict[str, str], errors: Any) -> dict[str, Any]:
    """The panel for a choice it cannot show: what is wrong, and the runs to choose from."""
    errors = {name: [str(v) for v in value] if isinstance(value, list) else [str(value)]
              for name, value in errors.items()}
    words = "; ".join(f"{name}: {' '.join(value)}" for name, value in errors.items())
    runs = job_logs.generations_of(job)
    return {"text": "", "notice": "", "generation": None, "run": None, "generations": len(runs),
            "runs": runs[::-1], "run_choices": _run_choices(runs), "rank": 0, "ranks": [], "rank_choices": [0],
            "follows_latest": True, "node": None,
            "end_offset": 0, "lines": OUTPUT_LINES, "raw_url": None, "chosen": chosen,
            "error": f"Cannot show that output: {words}", "errors": errors}


def _live_url(job: Job, output: dict[str, Any], runs_before: int | None = None) -> str:
    """The page's live refresh, asking for the same rank and run as the page, and the same runs
    (`runs_before`: older ones than the latest); a bad choice is left out: the page says what is
    wrong and its Output panel is not refreshed."""
    url = reverse("frontend:job-json", args=[job.pk])
    chosen = {**(output["chosen"] if not output["error"] else {}),
              **({RUNS_BEFORE: runs_before} if runs_before is not None else {})}
    return url + "?" + urlencode(chosen) if chosen else url


def _status_html(request: HttpRequest, payload: dict[str, Any]) -> str:
    return render_to_string("frontend/_job_status.html", payload, request=request)


def _number_text(value: float | None, unit_s: int) -> str:
    """Seconds as the Change form's hours or minutes field shows them: `4`, `1.5`; "" for none."""
    return "" if value is None else f"{value / unit_s:g}"


#: The Change form's units for a runtime limit: (kind, label, seconds per unit), largest first.
_LIMIT_UNITS = (("hours", "hours", 3600), ("minutes", "minutes", 60), ("seconds", "seconds", 1))


def limit_field(seconds: int | None) -> dict[str, str]:
    """A runtime limit as the Change form shows it: in the largest unit that says it in at most
    two decimals, exactly (`4` or `1.5` hours, `10` minutes, `601` seconds), so what the field
    shows is what is stored and sending it back changes nothing. A 10-minute limit read
    "0.166667" hours (demo walk, 5 Dec). None: hours, empty (the class's default)."""
    if seconds is None:
        return {"kind": "hours", "label": "hours", "value": ""}
    for kind, label, unit in _LIMIT_UNITS:
        if (seconds * 100) % unit == 0:
            amount = Decimal(seconds) / unit
            return {"kind": kind, "label": label, "value": f"{amount.normalize():f}"}
    raise AssertionError("a whole number of seconds is always said in seconds")


def change_form(request: HttpRequest, job: Job, runs_after: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The job page's Change form (PATCH jobs/{id}/, as `qm update`): the fields the service
    lets change on this job as it stands (services/holds.changeable_now: the lot while it
    waits, its dependencies among them, its name and runtime limit once it runs), their
    current values and the choices they offer; None for a job that has ended or one the user
    may not change (as PATCH). `runs_after`: the page's dependencies (`page_of`), whose text
    (dependency_text.text_of, as the job.updated event says it; "" for none) fills "Runs after"."""
    fields = holds.changeable_now(job)
    if not fields or not access.access_of(request.user).may_submit_for(job.team_id):
        return None
    runs_after_text = dependency_text.text_of(((d["job"], d["condition"]) for d in runs_after), singleton=job.singleton,
                                              any_of=job.dependency_mode == "any")
    return {
        "fields": fields,
        "url": reverse("v1:job-detail", args=[job.pk]),
        "dependencies_text": "" if runs_after_text == dependency_text.NONE else runs_after_text,
        "runtime_limit": limit_field(job.runtime_limit_s),
        "checkpoint_interval_min": _number_text(job.checkpoint_interval_s, 60),
        "priority_classes": job_service.classes_offered(access.access_of(request.user), [job.team],
                                                        keep=job.priority_class)
        if "priority_class" in fields else [],
        "projects": list(Project.objects.filter(team_id=job.team_id).order_by("name").values_list("name", flat=True))
        if "project" in fields else [],
        "gpu_types": list(GpuType.objects.order_by("name")) if "gpu_types" in fields else [],
        "topologies": Topology.choices,
    }


@login_required
@require_GET
def job_detail(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _visible_job(request, job_id)
    payload = job_payload(request, job)
    return render(request, "frontend/job_detail.html", {
        **payload,
        "page": "jobs",
        "charts": {c.key: c for c in payload["charts"]},
        "live_url": _live_url(job, payload["output"], payload.get("runs_before")),
        "change": change_form(request, job, payload["runs_after"]),
    }, status=400 if payload["output"]["error"] or payload.get("runs_error") else 200)


@login_required
@answers_json
@require_GET
def job_json(request: HttpRequest, job_id: int) -> JsonResponse:
    job = _visible_job(request, job_id)
    payload = job_payload(request, job)
    if payload["output"]["error"]:  # a bad ?rank= or ?generation=: 400 naming it, as the API's logs/
        errors = payload["output"]["errors"]
        return JsonResponse({"errors": errors, "detail": payload["output"]["error"]}, status=400)
    if payload.get("runs_error"):  # a bad ?runs_before=: 400 naming it, as the API's runs/ a bad offset
        return JsonResponse({"errors": payload["runs_errors"], "detail": payload["runs_error"]}, status=400)
    return JsonResponse({
        "state": job.state,
        "charts": figures.charts_json(payload["charts"]),
        "html": {
            "job-status": _status_html(request, payload),
            "job-head": render_to_string("frontend/_job_head.html", payload, request=request),
            "job-shape": render_to_string("frontend/_job_shape.html", payload, request=request),
            "job-events": render_to_string("frontend/_job_events.html", payload, request=request),
            "job-gpus": render_to_string("frontend/_job_gpus.html", payload, request=request).strip(),
            "job-output": render_to_string("frontend/_job_output.html", payload, request=request),
            "job-runs": render_to_string("frontend/_job_runs.html", payload, request=request),
        },
    })
