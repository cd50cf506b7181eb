"""Jobs and job arrays: submit, list, change, hold, release, requeue and cancel, a job's events,
runs, explanation and logs; with the words for a job's stop that the pages share
(cancel_refusal, stop_notice). A few lines each: scoping comes from services/access.py, rules
from services/."""

from __future__ import annotations

import re
import uuid
from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api import job_logs as logs_api
from controlplane.api.errors import Conflict
from controlplane.api.pagination import JobsPagination, Pagination, RunsPagination
from controlplane.api.permissions import SubmitsJobs
from controlplane.api.serializers.fleet import EventSerializer
from controlplane.api.serializers.job_requests import (
    ArrayRequeueSerializer,
    HoldSerializer,
    JobArrayLimitSerializer,
    JobArraySubmitSerializer,
    JobSubmitSerializer,
    JobUpdateSerializer,
    RequeueSerializer,
    gpu_types_as_sent,
)
from controlplane.api.serializers.jobs import (
    CancelResultSerializer,
    ExplanationSerializer,
    JobArrayCancelSerializer,
    JobArrayHoldSerializer,
    JobArrayLimitResultSerializer,
    JobArrayRequeueSerializer,
    JobArraySerializer,
    JobChangeSerializer,
    JobDetailSerializer,
    JobSerializer,
    attach_dependencies,
    attach_gpus_held,
    job_payload,
)
from controlplane.api.serializers.runs import JobRunSerializer
from controlplane.api.serializers.scheduling_loop import loop_state
from controlplane.api.serializers.sentences import said, utc_second
from controlplane.api.serializers.submit_fast_path import plain_submit_request
from controlplane.api.views.api_mixin import ApiMixin, action_body, refuse_fields
from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.filtersets import JobFilterSet
from controlplane.models import Allocation, AllocationGpu, Event, Job
from controlplane.services import (
    access,
    array_limit,
    dependencies,
    eta_record,
    holds,
    job_costs,
    job_history,
    job_mentions,
    job_pages,
    job_runs,
)
from controlplane.services import jobs as job_service
from controlplane.services import requeue as requeue_service
from controlplane.services.dependencies import NEVER_SATISFIED
from controlplane.services.stopping import label_totals, state_label, stop_reasons, totals_by_label
from controlplane.services.transitions import (
    RELEASE_CANCELLED,
    RELEASE_RUNTIME_LIMIT,
    REQUEUEING_STOPS,
    STOP_NOTICE_KINDS,
    cancel_job,
    notice_kind,
)
from scheduler_core.sentences import counted

IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,128}\Z")  # \Z: "$" lets a trailing newline through


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.match(key):
        raise ValidationError({"Idempotency-Key": ["1 to 128 printable ASCII characters, no spaces."]})
    return key


def _submit(request: Request, serializer_class: type[JobSubmitSerializer]) -> job_service.Submitted:
    # The common, plainly valid body is typed directly; anything else goes through the
    # serializer, which names each field at fault.
    submit_request = plain_submit_request(request.data, serializer_class)
    if submit_request is None:
        body = serializer_class(data=request.data)
        if not body.is_valid():  # every field at fault, at once
            raise ValidationError(gpu_types_as_sent(request.data, body.errors_with_the_rest(request.user))[0])
        submit_request = body.to_submit_request()
    try:
        return job_service.submit(request.user, submit_request, idempotency_key=_idempotency_key(request))
    except job_service.SubmitRejected as exc:
        raise ValidationError(gpu_types_as_sent(request.data, {k: [v] for k, v in exc.errors.items()})[0]) from exc
    except job_service.IdempotencyConflict as exc:
        raise Conflict(str(exc)) from exc


_IDEMPOTENCY_PARAM = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="A retried POST with the same key (and body) returns the first result instead of a duplicate.",
)


class JobViewSet(ApiMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Jobs of your team (admins: all). Submitting needs only `name` and `gpus`."""

    serializer_class = JobSerializer
    filterset_class = JobFilterSet
    pagination_class = JobsPagination  # its list's page says the loop's state
    permission_classes = [SubmitsJobs]

    def get_queryset(self) -> QuerySet[Job]:
        # `place`: a waiting job's queue position, ETA and the numbers of its reason.
        return access.visible_jobs(self.request.user).select_related(
            "team", "project", "submitter", "priority_class", "place", "held_by"
        )

    def get_object(self) -> Job:
        """The job, or a 404 in words (DRF's "No Job matches the given query." reached `qm`
        users as is): the same answer whether it does not exist or is another team's."""
        try:
            return super().get_object()  # type: ignore[no-any-return]
        except Http404:
            raise NotFound(f"No job {str(self.kwargs.get('pk'))[:40]}, or not yours to see.") from None

    @extend_schema(responses={200: JobDetailSerializer})
    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Its queue position, ETA and reason are the last cycle's word, as on jobs/ and explain/:
        # the loop's state beside them (one query), so `qm status --json` carries it as
        # `qm list --json` and `qm explain --json` do, in its one request.
        return Response({**job_payload(self.get_object()), "loop": loop_state()})

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # job_payload renders a page of 50 jobs several times faster than the ModelSerializer.
        jobs = self.filter_queryset(self.get_queryset())
        # the page's ids first, sorted on the jobs table alone; then their rows (job_pages)
        page = job_pages.jobs_of_page(jobs, self.paginate_queryset(job_pages.ids_in_order(jobs)))
        attach_dependencies(page)  # one query for the page's dependencies and dependents
        attach_gpus_held(page)  # one query for the page's held GPUs, not one per job
        job_mentions.prefetch(text for job in page  # one for the teams of the jobs their reasons name
                              for text in (job.pending_message, job.pending_would_start_if, job.growth_note))
        job_history.attach_history(page)  # one for its GPU-hours and nodes ever held (none for a queue)
        read_at = timezone.now()  # every running job's elapsed_s to the same instant
        for job in page:
            job.read_at = read_at  # type: ignore[attr-defined]
        return self.get_paginated_response([job_payload(job) for job in page])

    @extend_schema(request=JobSubmitSerializer, responses={201: JobSerializer, 200: JobSerializer},
                   parameters=[_IDEMPOTENCY_PARAM])
    def create(self, request: Request) -> Response:
        result = _submit(request, JobSubmitSerializer)
        if not result.replayed:
            result.job.unranked()  # a job just submitted has no place in the queue yet: no query
            result.job.gpus_held = 0  # nor any GPUs
            result.job.nodes_held = []  # on any node
            result.job.dependent_ids = []  # and no job can wait on it yet
            if not (isinstance(request.data, dict) and request.data.get("dependencies")):
                result.job.dependency_list = []  # nor does it wait on any
        # The job carries its team, project, class and submitter objects: no query to render it.
        return Response(
            job_payload(result.job),
            status=status.HTTP_200_OK if result.replayed else status.HTTP_201_CREATED,
            headers={"Idempotent-Replayed": "true"} if result.replayed else {},
        )

    @extend_schema(request=None, responses={200: CancelResultSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        refuse_fields(request, "cancel takes no fields")
        job = self.get_object()
        self._refuse_unless_cancellable(job)
        if not cancel_job(job, f"user:{request.user.get_username()}"):
            # Something got there first (another cancel, a bind, an exit): say where it is now.
            job.refresh_from_db()
            self._refuse_unless_cancellable(job)
            raise Conflict(f"Job {job.pk} changed state meanwhile; nothing was cancelled. Try again.")
        was = job.state
        job.refresh_from_db()
        if job.state == JobState.CANCELLED:
            gone = dependencies.cancelled_with({job.pk: job.finished_at}) if job.finished_at else []
            detail = f"Job {job.pk} cancelled." + taken_with(request, gone, "it", "it")
        elif was == JobState.PREEMPTING:
            stop = self._stop(job)
            by = (f" by {utc_second(stop.release_deadline)}"
                  if stop is not None and stop.release_deadline else "")
            detail = (f"Job {job.pk} was being stopped to be requeued; it will be cancelled instead of being "
                      f"requeued when its processes exit{by}.")
        else:
            detail = f"Job {job.pk} is stopping: its processes get {job.priority_class.grace_period_s} s to exit."
        return Response({"job": job_payload(job), "detail": detail})


    @extend_schema(request=JobUpdateSerializer, responses={200: JobChangeSerializer})
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Change a job (`scontrol update`): while it waits, its name, project, priority class,
        limits, shape and dependencies (the whole new list), judged as a submit of the changed
        job would be (a dependency cycle refused too); once it runs, its name and a lower
        runtime limit (admins may raise it). 409 names each field a running job cannot change.
        Every field at fault is named in one answer, malformed or refused: 400 when any value is
        invalid, else 409, else 403 (docs/api.md)."""
        job = self.get_object()
        body = JobUpdateSerializer(data=request.data)
        if not body.is_valid():
            try:
                errors = body.errors_with_the_rest(request.user, job.pk)
            except holds.Refused as refusal:
                return refusal_answer(refusal)  # about the job as a whole: another team's, an ended one
            raise ValidationError(gpu_types_as_sent(request.data, errors)[0])
        return self._changed(lambda: holds.update(request.user, job.pk, dict(body.validated_data)),
                             sent=request.data)

    @extend_schema(request=HoldSerializer, responses={200: JobChangeSerializer})
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, pk: str | None = None) -> Response:
        """Hold a waiting job (`scontrol hold`): out of the queue until released, with an optional
        `reason` in the holder's words. An admin's hold is released only by an admin."""
        reason = hold_reason_of(request)
        job = self.get_object()
        return self._changed(lambda: holds.hold(request.user, job.pk, reason=reason))

    @extend_schema(request=None, responses={200: JobChangeSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str | None = None) -> Response:
        """Release a held job (`scontrol release`): back in the queue from the next cycle."""
        refuse_fields(request, "release takes no fields")
        job = self.get_object()
        return self._changed(lambda: holds.release(request.user, job.pk))

    @extend_schema(request=RequeueSerializer, responses={200: JobChangeSerializer})
    @action(detail=True, methods=["post"])
    def requeue(self, request: Request, pk: str | None = None) -> Response:
        """Requeue a running job (`scontrol requeue`; `"hold": true`: `scontrol requeuehold`): its
        processes get its class's grace period to exit, then it goes back to the queue with the
        same id (held with `hold`), from its last checkpoint. An ended job (succeeded, failed,
        cancelled, timed out) goes back to the queue at once with the same id, its earlier runs
        kept. 409 with why for a job that waits or is stopping already, or an ended job still
        holding GPUs or with a dependency that can never be met; 400 naming the fields when the
        ended job would no longer be accepted as a submit."""
        hold, reason = requeue_body(request)
        job = self.get_object()
        return self._changed(lambda: requeue_service.requeue(request.user, job.pk, hold=hold, reason=reason))

    def _changed(self, act: Any, sent: Any = None) -> Response:
        try:
            outcome = act()
        except holds.Refused as refusal:
            if sent is not None:  # a change's fields, named as the body named them
                refusal.errors, refusal.detail = gpu_types_as_sent(sent, refusal.errors, refusal.detail)
            return refusal_answer(refusal)
        job = self.get_queryset().get(pk=outcome.job.pk)
        body = {"job": job_payload(job), "changed": outcome.changed, "detail": outcome.detail}
        if self.action == "partial_update":
            body["changes"] = {name: [old, new] for name, (old, new) in outcome.changes.items()}
        return Response(body)

    def _refuse_unless_cancellable(self, job: Job) -> None:
        refusal = cancel_refusal(job)
        if refusal is not None:
            raise Conflict(refusal)

    @staticmethod
    def _stop(job: Job) -> Allocation | None:
        return stop_of(job)

    @extend_schema(responses={200: EventSerializer(many=True)}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None, serializer_class=EventSerializer,
            pagination_class=Pagination, query_parameters=frozenset({"format", "limit", "offset"}))
    def events(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        events = Event.objects.filter(job=job).select_related("node", "team").order_by("created_at", "id")
        page = self.paginate_queryset(events)
        return self.get_paginated_response(EventSerializer(page, many=True).data)

    @extend_schema(responses={200: JobRunSerializer(many=True)}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None, serializer_class=JobRunSerializer,
            pagination_class=RunsPagination, query_parameters=frozenset({"format", "limit", "offset"}))
    def runs(self, request: Request, pk: str | None = None) -> Response:
        """The job's runs, oldest first (`sacct --duplicates`): one per bind, with how each ended
        (preempted, requeued, fenced, exited), its GPUs, the GPU-hours it held, what it cost (as
        showback charges it) and the work its requeue lost; `total_cost_usd`: all its runs.
        Paged as `events/`; a job that never ran has none."""
        job = self.get_object()
        now = timezone.now()
        page = self.paginate_queryset(job_runs.runs_of(job))
        costs = job_costs.run_costs(job.pk, now)
        runs = job_runs.describe(job, page, first=self.paginator.offset + 1, now=now, costs=costs)
        self.paginator.total_cost_usd = float(costs.total_usd)
        return self.get_paginated_response(JobRunSerializer(runs, many=True).data)

    @extend_schema(responses={200: ExplanationSerializer}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None)
    def explain(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        return Response(explanation(job))

    @extend_schema(responses={200: logs_api.RESPONSE}, parameters=logs_api.PARAMETERS, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None, query_parameters=logs_api.QUERY_PARAMETERS,
            renderer_classes=[JSONRenderer, BrowsableAPIRenderer, logs_api.LogTextRenderer])
    def logs(self, request: Request, pk: str | None = None) -> Response:
        """The job's output (stdout and stderr) by rank and run, as its agents shipped it: follow
        it with `offset` = the last reply's `next_offset`; `?format=txt` for the text alone."""
        return Response(logs_api.read(self.get_object(), request.query_params))


def refusal_answer(refusal: holds.Refused) -> Response:
    """A hold, release or change refused by services/holds.py, in the API's error shape: 403
    (naming the field when the refusal is about one: a member raising a running job's limit);
    409, naming each field a running or ended job cannot change (`errors`, as a 400 names
    them); or 400 naming each field at fault."""
    if refusal.status == 400:  # a field may have two problems: its value's, and the job's state's
        raise ValidationError({name: [message] if isinstance(message, str) else message
                               for name, message in refusal.errors.items()}
                              or {"non_field_errors": [refusal.detail]})
    if refusal.status == 403 and not refusal.errors:
        raise PermissionDenied(refusal.detail)
    if not refusal.errors:
        raise Conflict(refusal.detail)
    # A refusal about fields names them, as a 400 does (the job page shows each next to its input).
    forbidden = refusal.status == 403
    return Response({"detail": refusal.detail, "code": "permission_denied" if forbidden else "conflict",
                     "errors": {name: [message] for name, message in refusal.errors.items()}},
                    status=status.HTTP_403_FORBIDDEN if forbidden else status.HTTP_409_CONFLICT)


def hold_reason_of(request: Request) -> str:
    """A hold's body: nothing, `{}` (what the pages send) or `{"reason": "…"}`; any other field,
    or a reason that is not one line of text, is refused naming it."""
    if not action_body(request, "send no body, {}, or {\"reason\": \"…\"}"):
        return ""
    body = HoldSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return str(body.validated_data.get("reason", ""))


def requeue_body(request: Request) -> tuple[bool, str]:
    """A requeue's body: nothing, `{}`, or `{"hold": true, "reason": "…"}`; any other field, a
    hold that is not a boolean or a reason that is not one line of text is refused naming it."""
    hold, reason, _ = _requeue_fields(request, RequeueSerializer)
    return hold, reason


def array_requeue_body(request: Request) -> tuple[bool, str, list[str]]:
    """An array's requeue body: a job's, and `"states": ["failed", …]` (the tasks' states to
    requeue, `["running"]` by default); an unknown state is refused naming `states`."""
    return _requeue_fields(request, ArrayRequeueSerializer)


def _requeue_fields(request: Request, serializer: Any) -> tuple[bool, str, list[str]]:
    if not action_body(request, "send no body, {}, or {\"hold\": true, \"reason\": \"…\"}"):
        return False, "", [JobState.RUNNING.value]
    body = serializer(data=request.data)
    body.is_valid(raise_exception=True)
    states = list(body.validated_data.get("states") or [JobState.RUNNING.value])
    return bool(body.validated_data.get("hold")), str(body.validated_data.get("reason", "")), states


def _where(job: Job) -> str:
    """` on 16 GPUs of h100-01, h100-02`: the GPUs a running job holds and their nodes, as the
    job page says them (one query); "" when it holds none."""
    rows = list(AllocationGpu.objects.filter(allocation__job=job, live=True).values_list("node__name", "role"))
    if not rows:
        return ""
    borrowed = f", {job.borrowed_said}" if job.borrowed else ""
    if not job.roles:
        return f" on {counted(len(rows), 'GPU')} of {', '.join(sorted({n for n, _ in rows}))}{borrowed}"
    # A heterogeneous gang: where each role runs, in the order the job names its roles.
    by_role: dict[str, list[str]] = {}
    for node, role in rows:
        by_role.setdefault(role, []).append(node)
    order = [str(r.get("name", "")) for r in job.roles]
    parts = [f"{role or 'unassigned'} {counted(len(names), 'GPU')} of {', '.join(sorted(set(names)))}"
             for role, names in sorted(by_role.items(), key=lambda kv: (kv[0] not in order, order.index(kv[0])
                                                                         if kv[0] in order else 0, kv[0]))]
    return f" on {counted(len(rows), 'GPU')}: {'; '.join(parts)}{borrowed}"


def explanation(job: Job) -> dict[str, Any]:
    """The engine's last word on a waiting job, or a plain account of where any other job is."""
    waiting = job.state == JobState.PENDING
    if waiting:
        reason = job.pending_message or "Waiting for the next scheduling cycle."
    elif job.state == JobState.PREEMPTING:
        reason = _stopping(job)
    elif job.state == JobState.RUNNING:
        reason = f"{job.get_state_display()} since {utc_second(job.started_at)}" if job.started_at else job.get_state_display()
        reason += _where(job) + "."
    elif job.state == JobState.UNSCHEDULABLE:
        reason = job.pending_message or "The fleet can never run this job as asked."
    elif ended_by_dependency(job):
        reason = job.pending_message  # why: what its upstream job did
    else:
        when = f" at {utc_second(job.finished_at)}" if job.finished_at else ""
        reason = f"{job.get_state_display()}{when}" + (f" with exit code {job.exit_code}." if job.exit_code is not None else ".")
    return {
        "job": job.pk,
        "name": job.name,
        "state": job.state,
        "state_label": state_label(job),
        "reason_code": job.pending_code if job.state in (JobState.PENDING, JobState.UNSCHEDULABLE)
        or ended_by_dependency(job) else "",
        "reason": said(reason),
        "resolvable": job.pending_resolvable if job.state == JobState.PENDING else job.state != JobState.UNSCHEDULABLE,
        "queue_position": job.queue_position if waiting else None,
        "eta": job.eta if waiting else None,
        "would_start_if": said(job.pending_would_start_if) if waiting else "",
        # how far ETAs held lately, the fleet's and its size class's; where its start lands at the
        # median share of the wait told that jobs of its size had lately, or why there is none
        **eta_record.explained(job if waiting else None),
        # a running elastic job below its maximum: why the last cycle did not grow it
        "growth_code": job.growth_code if job.state == JobState.RUNNING else "",
        "growth_note": said(job.growth_note) if job.state == JobState.RUNNING else "",
        # the reason, place and ETA above are the last cycle's word: how old it is
        "loop": loop_state(),
    }


def ended_by_dependency(job: Job) -> bool:
    """A job cancelled because a dependency of it can never be met: its reason says which."""
    return job.state == JobState.CANCELLED and job.pending_code == NEVER_SATISFIED


#: The notices of a stop: a preemption's, any other stop's that requeues or ends the job (a
#: resize, a requeue asked for, a gang member's exit: `job.stopping`, `job.preempting` before
#: migration 0032), a cancel's, a runtime limit's.
_STOP_KINDS = (*STOP_NOTICE_KINDS, EventKind.JOB_CANCELLED, EventKind.JOB_TIMED_OUT)


def stop_of(job: Job) -> Allocation | None:
    """The allocation being stopped under a stopping job (its latest generation)."""
    return job.allocations.filter(state=AllocationState.RELEASING).order_by("-generation").first()


def taken_with(request: Request, gone: list[tuple[int, str, int | None, int]], cancelled: str, on: str) -> str:
    """The jobs a cancel took with it (`gone`: dependencies.cancelled_with, waiting on what was
    cancelled, their dependency never to be met now, and theirs down the chain), named as the
    reader may see them: the cancel's one answer about them, which a researcher who cancelled a
    job, or a whole array, would otherwise not hear of. `cancelled`: "it" (a job) or "them" (an
    array's tasks); `on`: what they waited on ("it", "its tasks"). "" for none."""
    if not gone:
        return ""
    viewer = access.access_of(request.user)
    listed = dependencies.jobs_named([(pk, name if viewer.may_read_team(team) else None, index)
                                      for pk, name, index, team in gone])
    return (f" With {cancelled} {counted(len(gone), 'job')} that waited on {on} {'was' if len(gone) == 1 else 'were'} "
            f"cancelled, {'its' if len(gone) == 1 else 'their'} dependency never to be met now: {listed}.")


def cancel_refusal(job: Job) -> str | None:
    """Why a cancel of this job would be refused (409), or None when it may be cancelled: a job
    stopped to be requeued (preempted, resized) may, its stop then ends it cancelled."""
    if job.state in (JobState.PENDING, JobState.RUNNING):
        return None
    if job.state == JobState.PREEMPTING:
        stop = stop_of(job)
        reason = stop.release_reason if stop is not None else ""
        if reason in REQUEUEING_STOPS:
            return None  # preempted or resized: the cancel turns the stop into a cancel
        if reason == RELEASE_RUNTIME_LIMIT:
            return (f"Job {job.pk} is already stopping at its runtime limit; it will end timed out "
                    "when its processes exit.")
        if reason == RELEASE_CANCELLED:
            return f"Job {job.pk} is already stopping; it will be cancelled when its processes exit."
        return f"Job {job.pk} is already stopping; it will end when its processes exit."
    return (f"Job {job.pk} has already ended: {job.get_state_display().lower()}; "
            "only pending or running jobs can be cancelled.")


def stop_notice(job: Job) -> tuple[str, str]:
    """A job being stopped: the kind of the notice that stopped it last (`job.preempting` for a
    preemption, `job.stopping` for a resize, a requeue asked for or a gang member's exit, an old
    `job.preempting` notice of such a stop read so too (transitions.notice_kind), `job.cancelled`,
    `job.timed_out`; "" when none was recorded) and the sentence `qm explain`
    and the job's page say: since when, that notice (preempted by whom and what it loses,
    cancelled by whom, its runtime limit, a gang member's exit) and its deadline."""
    since = f"Stopping since {utc_second(job.state_changed_at)}"
    allocation = stop_of(job)
    if allocation is None:
        return "", since + "."
    last = (
        Event.objects.filter(job=job, allocation=allocation, kind__in=_STOP_KINDS)
        .order_by("-created_at", "-id").values_list("kind", "reason", "message").first()
    )
    kind, notice = (notice_kind(last[0], last[1]), last[2]) if last is not None else ("", allocation.release_reason)
    text = f"{since}: {notice.rstrip('.')}." if notice else f"{since}."
    if allocation.release_deadline is not None:
        text += f" Its processes must exit by {utc_second(allocation.release_deadline)}."
    return kind, text


def _stopping(job: Job) -> str:
    return stop_notice(job)[1]


class JobArrayViewSet(ApiMixin, viewsets.GenericViewSet):
    """Job arrays: one POST, one job per index (a sweep). Read the tasks at /jobs/?array_id=…"""

    permission_classes = [SubmitsJobs]
    serializer_class = JobArraySerializer
    lookup_field = "array_id"
    lookup_value_regex = "[0-9a-fA-F-]{32,36}"

    def _summary(self, jobs: QuerySet[Job]) -> dict[str, Any]:
        rows = list(jobs.order_by("array_index").values_list("id", "array_index", "state", "name", "team__name", "array_id",
                                                             "array_task_limit"))
        if not rows:
            raise NotFound("No such job array, or not yours to see.")
        states: dict[str, int] = {}
        for row in rows:
            states[row[2]] = states.get(row[2], 0) + 1
        # A stopping task is counted by why it stops, as its own state_label says (one query,
        # none when no task is stopping).
        reasons = stop_reasons([r[0] for r in rows if r[2] == JobState.PREEMPTING])
        return {
            "array_id": rows[0][5], "name": rows[0][3], "team": rows[0][4], "count": len(rows),
            "states": states, "state_labels": {label: n for _, label, n in totals_by_label(states, reasons)},
            "job_ids": [r[0] for r in rows], "indices": [r[1] for r in rows], "array_task_limit": rows[0][6],
            "held": holds.held_waiting(jobs),
        }

    @extend_schema(request=JobArraySubmitSerializer, responses={201: JobArraySerializer, 200: JobArraySerializer},
                   parameters=[_IDEMPOTENCY_PARAM])
    def create(self, request: Request) -> Response:
        result = _submit(request, JobArraySubmitSerializer)
        # Tasks are created pending; a replay reads their states now.
        totals = (
            label_totals(Job.objects.filter(array_id=result.array_id))
            if result.replayed else [(JobState.PENDING.value, JobState.PENDING.value, len(result.job_ids))]
        )
        states: dict[str, int] = {}
        for state, _, n in totals:
            states[state] = states.get(state, 0) + n
        body = {
            "array_id": result.array_id, "name": result.job.name, "team": result.job.team.name,
            "count": len(result.job_ids), "states": states,
            "state_labels": {label: n for _, label, n in totals},
            "job_ids": result.job_ids, "indices": result.indices, "array_task_limit": result.job.array_task_limit,
            # created held (`hold`), every task waits held; a replay counts them as they are now
            "held": (holds.held_waiting(Job.objects.filter(array_id=result.array_id)) if result.replayed
                     else len(result.job_ids) if result.job.hold else 0),
        }
        return Response(
            body,
            status=status.HTTP_200_OK if result.replayed else status.HTTP_201_CREATED,
            headers={"Idempotent-Replayed": "true"} if result.replayed else {},
        )

    def _tasks(self, request: Request, array_id: str | None) -> QuerySet[Job]:
        try:
            uuid.UUID(str(array_id))
        except ValueError:
            raise NotFound("No such job array, or not yours to see.") from None
        return access.visible_jobs(request.user).filter(array_id=array_id)

    def retrieve(self, request: Request, array_id: str | None = None) -> Response:
        return Response(self._summary(self._tasks(request, array_id)))

    @extend_schema(request=JobArrayLimitSerializer, responses={200: JobArrayLimitResultSerializer})
    def partial_update(self, request: Request, array_id: str | None = None) -> Response:
        """Change the array's task limit (`scontrol update jobid=ARRAY ArrayTaskThrottle=N`) on every
        task at once; null lifts it. Its team's members and admins; 404 for an array not yours to see."""
        body = JobArrayLimitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            done = array_limit.set_task_limit(request.user, str(array_id), body.validated_data["array_task_limit"])
        except holds.Refused as refusal:
            if refusal.status == 404:
                raise NotFound(refusal.detail) from None
            return refusal_answer(refusal)
        summary = self._summary(self._tasks(request, array_id))
        return Response({**summary, "changed": bool(done.changed), "was": done.was, "detail": done.detail})

    @extend_schema(request=HoldSerializer, responses={200: JobArrayHoldSerializer})
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, array_id: str | None = None) -> Response:
        """Hold every waiting task (`scontrol hold ARRAY`); running and ended tasks are counted."""
        return self._hold(request, array_id, release_them=False)

    @extend_schema(request=None, responses={200: JobArrayHoldSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request: Request, array_id: str | None = None) -> Response:
        """Release every held task (`scontrol release ARRAY`); an admin's holds only by an admin."""
        return self._hold(request, array_id, release_them=True)

    def _hold(self, request: Request, array_id: str | None, *, release_them: bool) -> Response:
        reason = ""
        if release_them:
            refuse_fields(request, "release takes no fields")
        else:
            reason = hold_reason_of(request)
        tasks = self._tasks(request, array_id)
        ids = list(tasks.filter(state=JobState.PENDING).order_by("array_index", "id").values_list("pk", flat=True))
        summary = self._summary(tasks)  # 404 when no such array, or not yours
        try:
            done = holds.hold_array(request.user, ids, release_them=release_them, reason=reason)
        except holds.Refused as refusal:
            return refusal_answer(refusal)
        summary = self._summary(tasks)
        not_waiting = summary["count"] - len(ids) + done.not_waiting
        past = "released" if release_them else "held"
        already = "not held" if release_them else "held already"
        detail = (f"Array {summary['array_id']} ({summary['name']}, {summary['count']} tasks): "
                  f"{len(done.changed) - len(done.reworded)} {past}"
                  + (f", {len(done.reworded)} held already with their reason changed" if done.reworded else "")
                  + (f", {done.unchanged} {already}" if done.unchanged else "")
                  + (f", {not_waiting} not waiting (running or ended)" if not_waiting else "")
                  + (f", {done.refused} under an admin's hold (only an admin releases it)" if done.refused else "")
                  + ".")
        return Response({**summary, "changed": done.changed, "unchanged": done.unchanged, "not_waiting": not_waiting,
                         "refused": done.refused, "reworded": done.reworded, "detail": detail})

    @extend_schema(request=ArrayRequeueSerializer, responses={200: JobArrayRequeueSerializer})
    @action(detail=True, methods=["post"])
    def requeue(self, request: Request, array_id: str | None = None) -> Response:
        """Requeue every running task (`scontrol requeue ARRAY`), each as `POST jobs/{id}/requeue/`
        does; with `states`, the tasks in those states instead (`["failed", "timed_out"]`: rerun a
        sweep's failed tasks). Tasks in other states and those already stopping are counted, not
        refused; an ended task refused (a dependency never met, ...) is listed with why."""
        hold, reason, states = array_requeue_body(request)
        tasks = self._tasks(request, array_id)
        summary = self._summary(tasks)  # 404 when no such array, or not yours
        try:
            done = requeue_service.requeue_array(request.user, summary["job_ids"], hold=hold, reason=reason,
                                                 states=states)
        except holds.Refused as refusal:
            return refusal_answer(refusal)
        summary = self._summary(tasks)
        running = JobState.RUNNING in states
        # In words, as `left` below says them ("timed out"): the API's names read as code here.
        ended = [str(JobState(state).label).lower() for state in states if state != JobState.RUNNING]
        left = ("not running (waiting or ended)" if states == [JobState.RUNNING] else
                f"not {' or '.join(str(JobState(state).label).lower() for state in states)}")
        limit = summary["array_task_limit"]
        parts = ([f"{len(done.requeued)} stopping to be requeued" + (" held" if hold else "")] if running else []) + (
            [f"{len(done.rerun)} ended ({', '.join(ended)}) back in the queue" + (" held" if hold else "")]
            if ended else [])
        detail = (f"Array {summary['array_id']} ({summary['name']}, {summary['count']} tasks): " + ", ".join(parts)
                  + (f", {len(done.not_requeued)} refused (below)" if done.not_requeued else "")
                  + (f", {done.not_running} {left}" if done.not_running else "")
                  + (f", {done.stopping} already stopping" if done.stopping else "")
                  + (f", {len(done.ended_meanwhile)} ended meanwhile (left as "
                     f"{'it' if len(done.ended_meanwhile) == 1 else 'they'} ended)" if done.ended_meanwhile else "")
                  + "."
                  + (f" The array runs at most {limit} task{'s' if limit != 1 else ''} at a time."
                     if limit and done.rerun else "")
                  + "".join(f" Job {r['job']}: {r['detail']}" for r in done.not_requeued[:10]))
        return Response({**summary, "requeued": done.requeued, "not_running": done.not_running,
                         "stopping": done.stopping, "rerun": done.rerun, "not_requeued": done.not_requeued,
                         "ended_meanwhile": done.ended_meanwhile, "detail": detail})

    @extend_schema(request=None, responses={200: JobArrayCancelSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, array_id: str | None = None) -> Response:
        """Every task still pending, running or stopping to be requeued is cancelled, one by one
        as `POST jobs/{id}/cancel/` does (`scancel ARRAY_ID`); tasks already finished are left
        alone, and those already stopping for another reason are counted as skipped."""
        refuse_fields(request, "cancel takes no fields")
        tasks = self._tasks(request, array_id)
        if not tasks.exists():
            raise NotFound("No such job array, or not yours to see.")
        actor = f"user:{request.user.get_username()}"
        # The waiting tasks together (a few statements), then each running or stopping one.
        done: list[int] = job_service.cancel_waiting(tasks, actor)
        skipped = 0
        live = (JobState.PENDING, JobState.RUNNING, JobState.PREEMPTING)
        for job in tasks.filter(state__in=live).select_related("priority_class").order_by("array_index", "id"):
            if cancel_refusal(job) is None and cancel_job(job, actor):
                done.append(job.pk)
            else:
                skipped += 1
        ended = dict(Job.objects.filter(pk__in=done, state=JobState.CANCELLED).values_list("pk", "finished_at")
                     ) if done else {}
        cancelled = len(ended)
        stopping = len(done) - cancelled
        summary = self._summary(tasks)
        # the jobs that waited on its tasks, cancelled with them, named as a single job's cancel names them
        gone = dependencies.cancelled_with({pk: at for pk, at in ended.items() if at is not None})
        detail = (f"Array {summary['array_id']} ({summary['name']}, {summary['count']} tasks): {cancelled} cancelled, "
                  f"{stopping} stopping" + (f", {skipped} already finished or stopping" if skipped else "") + "."
                  + taken_with(request, gone, "them", "its tasks"))
        return Response({**summary, "cancelled": cancelled, "stopping": stopping, "skipped": skipped,
                         "detail": detail})
