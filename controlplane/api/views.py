"""API views: a few lines each. Scoping comes from services/access.py, rules from services/."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

from django.contrib.auth import authenticate
from django.db import transaction
from django.db.models import Count, OuterRef, ProtectedError, Q, QuerySet, RestrictedError, Subquery
from django.http import Http404, HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.urls import Resolver404, resolve
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.permissions import AllowAny
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from controlplane.api import job_logs as logs_api
from controlplane.api import serializers as s
from controlplane.api.authentication import TokenAuthentication
from controlplane.api.errors import Conflict, exception_handler, refused_deletion
from controlplane.api.filter_backends import refuse_unknown_parameters
from controlplane.api.pagination import Pagination, RunsPagination
from controlplane.api.parsers import BoundedJSONParser
from controlplane.api.permissions import IsAdmin, IsPerson, ReadOnlyUnlessAdmin, SubmitsJobs
from controlplane.api.schema import QuartermasterAutoSchema
from controlplane.api.throttling import LoginThrottle, PerUserThrottle
from controlplane.choices import AllocationState, EventKind, JobState
from controlplane.filtersets import (
    CohortFilterSet,
    EventFilterSet,
    GpuTypeFilterSet,
    JobFilterSet,
    NodeFilterSet,
    PriceRateFilterSet,
    PriorityClassFilterSet,
    ProjectFilterSet,
    QuotaFilterSet,
    TeamFilterSet,
)
from controlplane.models import (
    Allocation,
    AllocationGpu,
    Cohort,
    Event,
    GpuType,
    Job,
    Membership,
    Node,
    PriceRate,
    PriorityClass,
    Quota,
)
from controlplane.services import (
    access,
    array_limit,
    cohorts,
    config_audit,
    eta_record,
    fair_share,
    fleet_figures,
    holds,
    job_costs,
    job_history,
    job_priority,
    job_runs,
    maintenance,
    nodes,
    quotas,
    scheduler_policy,
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

IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,128}$")


class ContentNegotiation(DefaultContentNegotiation):
    """DRF's negotiation, with the answer for the commonest request given at once: a client
    that accepts exactly `application/json` (the CLI, scripts, the load benchmark), asking for
    no format override, gets the JSON renderer, as the full negotiation would decide."""

    def select_renderer(self, request: Request, renderers: Any, format_suffix: str | None = None) -> Any:
        if (
            format_suffix is None
            and request.META.get("HTTP_ACCEPT") == "application/json"
            and self.settings.URL_FORMAT_OVERRIDE not in request.query_params
            and renderers and type(renderers[0]) is JSONRenderer
        ):
            return renderers[0], "application/json"
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except Http404:
            # DRF answers an unknown `?format=` with a bare 404 "Not found.", which reads as a
            # missing endpoint: it is a bad query parameter, a 400 naming it.
            wanted = str(request.query_params.get(self.settings.URL_FORMAT_OVERRIDE, ""))[:40]
            takes = ", ".join(sorted({r.format for r in renderers}))
            raise ValidationError({"format": [f"'{wanted}' is not a format here: use {takes}."]}) from None


class ApiMixin:
    """What every user-facing endpoint shares. Authentication is spelled out rather than taken
    from settings: only user tokens and sessions authenticate here, so a node agent's
    credentials, whatever classes the agent endpoints add, never reach these views."""

    authentication_classes = [TokenAuthentication, SessionAuthentication]
    permission_classes = [IsPerson]
    parser_classes = [BoundedJSONParser]
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer]
    content_negotiation_class = ContentNegotiation
    throttle_classes = [PerUserThrottle]
    pagination_class = Pagination
    schema = QuartermasterAutoSchema()

    def get_exception_handler(self) -> Any:
        return exception_handler

    #: The query parameters a GET of this view takes when it is not a filtered list (whose
    #: filter backend names unknown ones); None: the view checks its own.
    query_parameters: frozenset[str] | None = frozenset({"format"})

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        self._started = time.perf_counter()
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        self._refuse_unknown_query_parameters(request)

    def _refuse_unknown_query_parameters(self, request: Request) -> None:
        """`GET jobs/5/explain/?verbose=1` answered as if the parameter meant something, as a
        list's unknown filter once did: a parameter the endpoint does not take is a 400 naming
        it (after authentication, so a stranger still gets the 401)."""
        takes = self.query_parameters
        if takes is not None and not (request.method == "GET" and getattr(self, "action", None) == "list"):
            # every method: a detail action looks its object up through the list's filters, so
            # `POST jobs/5/cancel/?team=vision` answered 404 "not yours to see" for a job that
            # is, and `?force=1` a 400 listing the list's filters as what cancel takes
            refuse_unknown_parameters(request, takes)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        """Adds `Server-Timing: app;dur=<ms>`: time inside the view, authentication included
        (what bench/api_load.py reports as server time)."""
        response = super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
        started = getattr(self, "_started", None)
        if started is not None:
            response["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.1f}"
        return response


class AdminWritableViewSet(ApiMixin, viewsets.ModelViewSet):
    """Everyone signed in reads within their scope; admins write. Writes run in a transaction
    so a failing constraint leaves nothing behind, with their config.changed event
    (services/config_audit.py) for the records it audits."""

    permission_classes = [ReadOnlyUnlessAdmin]

    def _actor(self) -> str:
        return f"user:{self.request.user.get_username()}"

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic():
            config_audit.record_config_change(serializer.save(), "created", None, self._actor())

    def perform_update(self, serializer: Any) -> None:
        with transaction.atomic():
            before = config_audit.before_change(serializer.instance)
            config_audit.record_config_change(serializer.save(), "changed", before, self._actor())

    @extend_schema(responses={200: s.DeletedSerializer, 204: None})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """204 when the deletion changed nothing else; else 200 saying what it did to the records
        that stay or went with it, as the admin's confirmation page lists them
        (config_audit.deleted_with: a cohort's teams leave it, a team's quotas go, ...)."""
        instance = self.get_object()
        lines = config_audit.deleted_with(instance)
        label = str(instance._meta.verbose_name)
        label = {"gpu type": "GPU type"}.get(label, label)
        name = getattr(instance, "name", instance)
        self.perform_destroy(instance)
        if not lines:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response({"detail": f"{label[:1].upper()}{label[1:]} {name} deleted: " + "; ".join(lines) + ".",
                         "consequences": lines})

    def perform_destroy(self, instance: Any) -> None:
        with transaction.atomic():
            if config_audit.audited(instance):
                config_audit.record_config_change(instance, "deleted", config_audit.config_record(instance),
                                                  self._actor())
            try:
                instance.delete()
            except ProtectedError as exc:
                raise Conflict(refused_deletion(instance, exc.protected_objects)) from None
            except RestrictedError as exc:
                raise Conflict(refused_deletion(instance, exc.restricted_objects)) from None


# ------------------------------------------------------------------------- unknown paths


@csrf_exempt  # it changes nothing; a token client has no CSRF cookie and must get this answer
def no_such_path(request: HttpRequest) -> HttpResponse:
    """A path under /api/ that is no endpoint: a 404 in the API's error shape (not the pages'
    HTML). A path that lacks only its trailing slash is redirected for GET and HEAD, as Django
    does; any other method is refused and told the right path, since HTTP clients follow a
    redirect of a POST as a GET: the submit would be lost behind a 200 and a page of jobs."""
    path = request.path_info
    if not path.endswith("/"):
        slashed = path + "/"
        try:
            resolve(slashed)
        except Resolver404:
            pass
        else:
            if request.method in ("GET", "HEAD"):
                query = request.META.get("QUERY_STRING", "")
                return HttpResponsePermanentRedirect(slashed + (f"?{query}" if query else ""))
            return JsonResponse({
                "detail": f"No endpoint at {path}. The API's paths end with a trailing slash: "
                          f"{request.method} {slashed}", "code": "not_found"}, status=404)
    return JsonResponse({"detail": f"No endpoint at {path}; see /api/schema/ for the API's paths.",
                         "code": "not_found"}, status=404)


# ------------------------------------------------------------------------------------ auth


class TokenView(ApiMixin, APIView):
    """Exchange a username and password for an API token (`Authorization: Token …`)."""

    authentication_classes: list[Any] = []
    permission_classes = [AllowAny]
    throttle_classes = [LoginThrottle]

    @extend_schema(request=s.TokenRequestSerializer, responses={200: s.TokenSerializer}, auth=[])
    def post(self, request: Request) -> Response:
        body = s.TokenRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = authenticate(request._request, username=body.validated_data["username"],
                            password=body.validated_data["password"])
        if user is None or not user.is_active:
            # 400 as DRF's own token view answers: the request carried no credentials to refuse.
            raise ValidationError({"password": ["Wrong username or password."]})
        token, _ = Token.objects.get_or_create(user=user)
        return Response({"token": token.key, "username": user.get_username()})


class LogoutView(ApiMixin, APIView):
    """Revoke the token this request was sent with: the next request with it is 401.

    A user has one token (DRF authtoken), shared by every `qm` they logged in with, so all of
    them are logged out; `POST auth/token/` then issues a new one. Called with a session (the
    browser), it revokes the user's API token likewise and leaves the session alone. Like
    logging in, it records no event (sign-ins and sign-outs are not in the audit trail)."""

    @extend_schema(request=None, responses={204: None})
    def post(self, request: Request) -> Response:
        if isinstance(request.auth, Token):
            Token.objects.filter(key=request.auth.key).delete()
        else:
            Token.objects.filter(user=request.user).delete()
        return Response(status=204)


class MeView(ApiMixin, APIView):
    """Who the credentials belong to, and what they may do."""

    @extend_schema(responses={200: s.MeSerializer})
    def get(self, request: Request) -> Response:
        who = access.access_of(request.user)
        team = access.primary_team(request.user)
        memberships = [
            {"team": name, "role": role}
            for name, role in Membership.objects.filter(user=request.user).values_list("team__name", "role")
        ]
        return Response({
            "username": request.user.get_username(),
            "is_admin": who.is_admin,
            "is_finance": who.is_finance,
            "may_submit": access.may_submit(request.user),
            "default_team": team.name if team else None,
            "memberships": memberships,
        })


# ------------------------------------------------------------------------------------ jobs


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not IDEMPOTENCY_KEY.match(key):
        raise ValidationError({"Idempotency-Key": ["1 to 128 printable ASCII characters, no spaces."]})
    return key


def _submit(request: Request, serializer_class: type[s.JobSubmitSerializer]) -> job_service.Submitted:
    # The common, plainly valid body is typed directly; anything else goes through the
    # serializer, which names each field at fault.
    submit_request = s.plain_submit_request(request.data, serializer_class)
    if submit_request is None:
        body = serializer_class(data=request.data)
        if not body.is_valid():
            raise ValidationError(body.errors_with_the_rest(request.user))  # every field at fault, at once
        submit_request = body.to_submit_request()
    try:
        return job_service.submit(request.user, submit_request, idempotency_key=_idempotency_key(request))
    except job_service.SubmitRejected as exc:
        raise ValidationError({k: [v] for k, v in exc.errors.items()}) from exc
    except job_service.IdempotencyConflict as exc:
        raise Conflict(str(exc)) from exc


_IDEMPOTENCY_PARAM = OpenApiParameter(
    "Idempotency-Key", str, OpenApiParameter.HEADER, required=False,
    description="A retried POST with the same key (and body) returns the first result instead of a duplicate.",
)


class JobViewSet(ApiMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Jobs of your team (admins: all). Submitting needs only `name` and `gpus`."""

    serializer_class = s.JobSerializer
    filterset_class = JobFilterSet
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

    def retrieve(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return Response(s.job_payload(self.get_object()))

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # job_payload renders a page of 50 jobs several times faster than the ModelSerializer.
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        s.attach_dependencies(page)  # one query for the page's dependencies and dependents
        s.attach_gpus_held(page)  # one query for the page's held GPUs, not one per job
        job_history.attach_history(page)  # one for its GPU-hours and nodes ever held (none for a queue)
        read_at = timezone.now()  # every running job's elapsed_s to the same instant
        for job in page:
            job.read_at = read_at  # type: ignore[attr-defined]
        return self.get_paginated_response([s.job_payload(job) for job in page])

    @extend_schema(request=s.JobSubmitSerializer, responses={201: s.JobSerializer, 200: s.JobSerializer},
                   parameters=[_IDEMPOTENCY_PARAM])
    def create(self, request: Request) -> Response:
        result = _submit(request, s.JobSubmitSerializer)
        if not result.replayed:
            result.job.unranked()  # a job just submitted has no place in the queue yet: no query
            result.job.gpus_held = 0  # nor any GPUs
            result.job.nodes_held = []  # on any node
            result.job.dependent_ids = []  # and no job can wait on it yet
            if not (isinstance(request.data, dict) and request.data.get("dependencies")):
                result.job.dependency_list = []  # nor does it wait on any
        # The job carries its team, project, class and submitter objects: no query to render it.
        return Response(
            s.job_payload(result.job),
            status=status.HTTP_200_OK if result.replayed else status.HTTP_201_CREATED,
            headers={"Idempotent-Replayed": "true"} if result.replayed else {},
        )

    @extend_schema(request=None, responses={200: s.CancelResultSerializer})
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
            detail = f"Job {job.pk} cancelled."
        elif was == JobState.PREEMPTING:
            stop = self._stop(job)
            by = (f" by {s.utc_second(stop.release_deadline)}"
                  if stop is not None and stop.release_deadline else "")
            detail = (f"Job {job.pk} was being stopped to be requeued; it will be cancelled instead of being "
                      f"requeued when its processes exit{by}.")
        else:
            detail = f"Job {job.pk} is stopping: its processes get {job.priority_class.grace_period_s} s to exit."
        return Response({"job": s.job_payload(job), "detail": detail})

    @extend_schema(request=s.JobUpdateSerializer, responses={200: s.JobChangeSerializer})
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        """Change a job (`scontrol update`): while it waits, its name, project, priority class,
        limits, shape and dependencies (the whole new list), judged as a submit of the changed
        job would be (a dependency cycle refused too); once it runs, its name and a lower
        runtime limit (admins may raise it). 409 names each field a running job cannot change.
        Every field at fault is named in one answer, malformed or refused: 400 when any value is
        invalid, else 409, else 403 (docs/api.md)."""
        job = self.get_object()
        body = s.JobUpdateSerializer(data=request.data)
        if not body.is_valid():
            try:
                errors = body.errors_with_the_rest(request.user, job.pk)
            except holds.Refused as refusal:
                return refusal_answer(refusal)  # about the job as a whole: another team's, an ended one
            raise ValidationError(errors)
        return self._changed(lambda: holds.update(request.user, job.pk, dict(body.validated_data)))

    @extend_schema(request=s.HoldSerializer, responses={200: s.JobChangeSerializer})
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, pk: str | None = None) -> Response:
        """Hold a waiting job (`scontrol hold`): out of the queue until released, with an optional
        `reason` in the holder's words. An admin's hold is released only by an admin."""
        reason = hold_reason_of(request)
        job = self.get_object()
        return self._changed(lambda: holds.hold(request.user, job.pk, reason=reason))

    @extend_schema(request=None, responses={200: s.JobChangeSerializer})
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str | None = None) -> Response:
        """Release a held job (`scontrol release`): back in the queue from the next cycle."""
        refuse_fields(request, "release takes no fields")
        job = self.get_object()
        return self._changed(lambda: holds.release(request.user, job.pk))

    @extend_schema(request=s.RequeueSerializer, responses={200: s.JobChangeSerializer})
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

    def _changed(self, act: Any) -> Response:
        try:
            outcome = act()
        except holds.Refused as refusal:
            return refusal_answer(refusal)
        job = self.get_queryset().get(pk=outcome.job.pk)
        body = {"job": s.job_payload(job), "changed": outcome.changed, "detail": outcome.detail}
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

    @extend_schema(responses={200: s.EventSerializer(many=True)}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None, serializer_class=s.EventSerializer,
            query_parameters=frozenset({"format", "limit", "offset"}))
    def events(self, request: Request, pk: str | None = None) -> Response:
        job = self.get_object()
        events = Event.objects.filter(job=job).select_related("node", "team").order_by("created_at", "id")
        page = self.paginate_queryset(events)
        return self.get_paginated_response(s.EventSerializer(page, many=True).data)

    @extend_schema(responses={200: s.JobRunSerializer(many=True)}, filters=False)
    @action(detail=True, methods=["get"], filterset_class=None, serializer_class=s.JobRunSerializer,
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
        return self.get_paginated_response(s.JobRunSerializer(runs, many=True).data)

    @extend_schema(responses={200: s.ExplanationSerializer}, filters=False)
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
    if refusal.status == 400:
        raise ValidationError({name: [message] for name, message in refusal.errors.items()}
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
    if not request.data:
        return ""
    if not isinstance(request.data, dict):
        raise ValidationError({"non_field_errors": ["send no body, {}, or {\"reason\": \"…\"}"]})
    body = s.HoldSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return str(body.validated_data.get("reason", ""))


def requeue_body(request: Request) -> tuple[bool, str]:
    """A requeue's body: nothing, `{}`, or `{"hold": true, "reason": "…"}`; any other field, a
    hold that is not a boolean or a reason that is not one line of text is refused naming it."""
    hold, reason, _ = _requeue_fields(request, s.RequeueSerializer)
    return hold, reason


def array_requeue_body(request: Request) -> tuple[bool, str, list[str]]:
    """An array's requeue body: a job's, and `"states": ["failed", …]` (the tasks' states to
    requeue, `["running"]` by default); an unknown state is refused naming `states`."""
    return _requeue_fields(request, s.ArrayRequeueSerializer)


def _requeue_fields(request: Request, serializer: Any) -> tuple[bool, str, list[str]]:
    if not request.data:
        return False, "", [JobState.RUNNING.value]
    if not isinstance(request.data, dict):
        raise ValidationError({"non_field_errors": ["send no body, {}, or {\"hold\": true, \"reason\": \"…\"}"]})
    body = serializer(data=request.data)
    body.is_valid(raise_exception=True)
    states = list(dict.fromkeys(body.validated_data.get("states") or [JobState.RUNNING.value]))
    return bool(body.validated_data.get("hold")), str(body.validated_data.get("reason", "")), states


def refuse_fields(request: Request, refusal: str) -> None:
    """An action takes no fields: any sent is refused naming it, as an unknown field of any other
    body is (`{"reason": "bad DIMM"}` on a cordon answered 200 and the reason was nowhere). No
    body, or `{}` (what the pages send), acts."""
    data = request.data
    if not data:
        return
    if isinstance(data, dict):
        raise ValidationError({str(k)[:64]: [refusal] for k in data})
    raise ValidationError({"non_field_errors": [f"{refusal}: send no body, or {{}}"]})


def _where(job: Job) -> str:
    """` on 16 GPUs of h100-01, h100-02`: the GPUs a running job holds and their nodes, as the
    job page says them (one query); "" when it holds none."""
    rows = list(AllocationGpu.objects.filter(allocation__job=job, live=True).values_list("node__name", "role"))
    if not rows:
        return ""
    borrowed = ", partly on capacity borrowed from the cohort" if job.borrowed else ""
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
        reason = f"{job.get_state_display()} since {s.utc_second(job.started_at)}" if job.started_at else job.get_state_display()
        reason += _where(job) + "."
    elif job.state == JobState.UNSCHEDULABLE:
        reason = job.pending_message or "The fleet can never run this job as asked."
    elif ended_by_dependency(job):
        reason = job.pending_message  # why: what its upstream job did
    else:
        when = f" at {s.utc_second(job.finished_at)}" if job.finished_at else ""
        reason = f"{job.get_state_display()}{when}" + (f" with exit code {job.exit_code}." if job.exit_code is not None else ".")
    return {
        "job": job.pk,
        "name": job.name,
        "state": job.state,
        "state_label": state_label(job),
        "reason_code": job.pending_code if job.state in (JobState.PENDING, JobState.UNSCHEDULABLE)
        or ended_by_dependency(job) else "",
        "reason": s.engine_times(reason),
        "resolvable": job.pending_resolvable if job.state == JobState.PENDING else job.state != JobState.UNSCHEDULABLE,
        "queue_position": job.queue_position if waiting else None,
        "eta": job.eta if waiting else None,
        "would_start_if": s.engine_times(job.pending_would_start_if) if waiting else "",
        # how far ETAs held lately, the fleet's and its size class's; where its start lands at the
        # median share of the wait told that jobs of its size had lately, or why there is none
        **eta_record.explained(job.eta if waiting else None, job.gpus),
        # a running elastic job below its maximum: why the last cycle did not grow it
        "growth_code": job.growth_code if job.state == JobState.RUNNING else "",
        "growth_note": job.growth_note if job.state == JobState.RUNNING else "",
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
    since = f"Stopping since {s.utc_second(job.state_changed_at)}"
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
        text += f" Its processes must exit by {s.utc_second(allocation.release_deadline)}."
    return kind, text


def _stopping(job: Job) -> str:
    return stop_notice(job)[1]


class JobArrayViewSet(ApiMixin, viewsets.GenericViewSet):
    """Job arrays: one POST, one job per index (a sweep). Read the tasks at /jobs/?array_id=…"""

    permission_classes = [SubmitsJobs]
    serializer_class = s.JobArraySerializer
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
        }

    @extend_schema(request=s.JobArraySubmitSerializer, responses={201: s.JobArraySerializer, 200: s.JobArraySerializer},
                   parameters=[_IDEMPOTENCY_PARAM])
    def create(self, request: Request) -> Response:
        result = _submit(request, s.JobArraySubmitSerializer)
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

    @extend_schema(request=s.JobArrayLimitSerializer, responses={200: s.JobArrayLimitResultSerializer})
    def partial_update(self, request: Request, array_id: str | None = None) -> Response:
        """Change the array's task limit (`scontrol update jobid=ARRAY ArrayTaskThrottle=N`) on every
        task at once; null lifts it. Its team's members and admins; 404 for an array not yours to see."""
        body = s.JobArrayLimitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            done = array_limit.set_task_limit(request.user, str(array_id), body.validated_data["array_task_limit"])
        except holds.Refused as refusal:
            if refusal.status == 404:
                raise NotFound(refusal.detail) from None
            return refusal_answer(refusal)
        summary = self._summary(self._tasks(request, array_id))
        return Response({**summary, "changed": bool(done.changed), "was": done.was, "detail": done.detail})

    @extend_schema(request=s.HoldSerializer, responses={200: s.JobArrayHoldSerializer})
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, array_id: str | None = None) -> Response:
        """Hold every waiting task (`scontrol hold ARRAY`); running and ended tasks are counted."""
        return self._hold(request, array_id, release_them=False)

    @extend_schema(request=None, responses={200: s.JobArrayHoldSerializer})
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

    @extend_schema(request=s.ArrayRequeueSerializer, responses={200: s.JobArrayRequeueSerializer})
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
        ended = [state for state in states if state != JobState.RUNNING]
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

    @extend_schema(request=None, responses={200: s.JobArrayCancelSerializer})
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
        cancelled = Job.objects.filter(pk__in=done, state=JobState.CANCELLED).count() if done else 0
        stopping = len(done) - cancelled
        summary = self._summary(tasks)
        detail = (f"Array {summary['array_id']} ({summary['name']}, {summary['count']} tasks): {cancelled} cancelled, "
                  f"{stopping} stopping" + (f", {skipped} already finished or stopping" if skipped else "") + ".")
        return Response({**summary, "cancelled": cancelled, "stopping": stopping, "skipped": skipped,
                         "detail": detail})


# ------------------------------------------------------------------------- fleet & teams


class TeamViewSet(AdminWritableViewSet):
    """Teams. A team joining, leaving or changing cohort is recorded as a cohort.changed event
    (reason TeamCohortChanged), as cohort changes are."""

    serializer_class = s.TeamSerializer
    filterset_class = TeamFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        return access.visible_teams(self.request.user).select_related("cohort", "default_priority_class")

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic():
            team = serializer.save()
            config_audit.record_config_change(team, "created", None, self._actor())
            cohorts.record_team_move(team, None, self._actor())

    def perform_update(self, serializer: Any) -> None:
        with transaction.atomic():
            before = cohorts.cohort_of(serializer.instance.pk)
            settings_before = config_audit.before_change(serializer.instance)
            team = serializer.save()
            config_audit.record_config_change(team, "changed", settings_before, self._actor())
            cohorts.record_team_move(team, before, self._actor())


class ProjectViewSet(AdminWritableViewSet):
    serializer_class = s.ProjectSerializer
    filterset_class = ProjectFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        return access.visible_projects(self.request.user).select_related("team")


class CohortViewSet(AdminWritableViewSet):
    """Cohorts: teams that lend each other quota. Every change is recorded as a cohort.changed
    event (reason CohortCreated, CohortChanged or CohortDeleted) with before and after."""

    serializer_class = s.CohortSerializer
    filterset_class = CohortFilterSet
    queryset = Cohort.objects.prefetch_related("teams")

    def _record(self, cohort: Cohort, verb: str, before: dict[str, Any] | None) -> None:
        cohorts.record_cohort_change(cohort, verb, before, f"user:{self.request.user.get_username()}")

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic():
            self._record(serializer.save(), "created", None)

    def perform_update(self, serializer: Any) -> None:
        with transaction.atomic():
            before = cohorts.cohort_record(serializer.instance)
            self._record(serializer.save(), "changed", before)

    def perform_destroy(self, instance: Cohort) -> None:
        with transaction.atomic():
            self._record(instance, "deleted", cohorts.cohort_record(instance))
            instance.delete()


class QuotaViewSet(AdminWritableViewSet):
    """Quotas per team × GPU type. Every change is recorded as a quota.changed event."""

    serializer_class = s.QuotaSerializer
    filterset_class = QuotaFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        return quotas.with_held_gpus(access.visible_quotas(self.request.user).select_related("team__cohort", "gpu_type"))

    def _record(self, quota: Quota, verb: str, before: dict[str, Any] | None) -> None:
        quotas.record_quota_change(quota, verb, before, f"user:{self.request.user.get_username()}")

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic():
            self._record(serializer.save(), "created", None)

    def perform_update(self, serializer: Any) -> None:
        with transaction.atomic():
            before = quotas.quota_record(serializer.instance)
            self._record(serializer.save(), "changed", before)

    def perform_destroy(self, instance: Quota) -> None:
        with transaction.atomic():
            before = quotas.quota_record(instance)
            self._record(instance, "deleted", before)
            instance.delete()


class PriorityClassViewSet(AdminWritableViewSet):
    serializer_class = s.PriorityClassSerializer
    filterset_class = PriorityClassFilterSet
    queryset = PriorityClass.objects.all()


class GpuTypeViewSet(AdminWritableViewSet):
    serializer_class = s.GpuTypeSerializer
    filterset_class = GpuTypeFilterSet
    queryset = GpuType.objects.all()


class PriceRateViewSet(AdminWritableViewSet):
    serializer_class = s.PriceRateSerializer
    filterset_class = PriceRateFilterSet
    queryset = PriceRate.objects.select_related("gpu_type")


class NodeViewSet(AdminWritableViewSet):
    """GPU nodes. State changes go through the cordon, drain, uncordon, retire and return actions
    (admins). A retired node stays listed (filter with ?state=retired, or ?state=ready&state=…)."""

    serializer_class = s.NodeSerializer
    filterset_class = NodeFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        now = timezone.now()
        # The maintenance window holding the node now, if any (it takes no work until it ends).
        holding = maintenance.active_at(now).filter(nodes=OuterRef("pk")).order_by("end_at", "id")
        return Node.objects.select_related("gpu_type").annotate(
            allocated_gpus=Count("allocation_gpus", filter=Q(allocation_gpus__live=True)),
            maintenance_window=Subquery(holding.values("id")[:1]),
            maintenance_ends_at=Subquery(holding.values("end_at")[:1]),
            cordon_reason=nodes.cordon_reason(),
        )

    def perform_create(self, serializer: Any) -> None:
        super().perform_create(serializer)
        serializer.instance.allocated_gpus = 0  # a new node holds nothing yet
        serializer.instance.maintenance_window = serializer.instance.maintenance_ends_at = None
        serializer.instance.cordon_reason = None

    def _act(self, request: Request, verb: Any) -> Response:
        name = "return" if verb is nodes.return_to_service else verb.__name__
        reason = ""
        if name in nodes.TAKES_REASON:
            if request.data and not isinstance(request.data, dict):
                raise ValidationError({"non_field_errors": ["send no body, {}, or {\"reason\": \"…\"}"]})
            body = s.NodeActionSerializer(data=request.data or {})
            body.is_valid(raise_exception=True)
            reason = str(body.validated_data.get("reason", ""))
        else:
            refuse_fields(request, f"{name} takes no fields (its node.state event records who did it and when)")
        node = self.get_object()
        try:
            done = nodes.act(name, node, request.user, reason=reason)
        except nodes.NodeActionRefused as exc:
            raise Conflict(str(exc)) from exc
        return Response({**s.NodeSerializer(self.get_queryset().get(pk=node.pk)).data, "changed": done.changed,
                         "detail": done.detail,
                         "running_jobs": [s.node_running_job(j) for j in done.running_jobs]})

    @extend_schema(request=s.NodeActionSerializer, responses={200: s.NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin])
    def cordon(self, request: Request, pk: str | None = None) -> Response:
        """Take no new work; running jobs continue."""
        return self._act(request, nodes.cordon)

    @extend_schema(request=s.NodeActionSerializer, responses={200: s.NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin])
    def drain(self, request: Request, pk: str | None = None) -> Response:
        """Take no new work and let running jobs finish."""
        return self._act(request, nodes.drain)

    @extend_schema(request=None, responses={200: s.NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin])
    def uncordon(self, request: Request, pk: str | None = None) -> Response:
        """Take work again (from cordoned or draining)."""
        return self._act(request, nodes.uncordon)

    @extend_schema(request=None, responses={200: s.NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin])
    def retire(self, request: Request, pk: str | None = None) -> Response:
        """Take the node out of the fleet for good: no work, no agent, no capacity or idle cost
        from now on. 409 while jobs hold its GPUs (drain it first)."""
        return self._act(request, nodes.retire)

    @extend_schema(request=None, responses={200: s.NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin], url_path="return", url_name="return")
    def return_to_service(self, request: Request, pk: str | None = None) -> Response:
        """Bring a retired node back: down until its agent registers again (then cordoned)."""
        return self._act(request, nodes.return_to_service)


class EventViewSet(ApiMixin, viewsets.ReadOnlyModelViewSet):
    """The audit trail: admins read all of it, members what happened to their team's jobs."""

    serializer_class = s.EventSerializer
    filterset_class = EventFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        return access.visible_events(self.request.user).select_related("node", "team")


# --------------------------------------------------------------------------------- metrics


class QueueMetricsView(ApiMixin, APIView):
    """Queue depth: pending jobs and GPUs by reason, priority class and team (counts only)."""

    @extend_schema(responses={200: s.QueueMetricsSerializer})
    def get(self, request: Request) -> Response:
        return Response(s.QueueMetricsSerializer(fleet_figures.queue_figures()).data)


class JobPriorityView(ApiMixin, APIView):
    """Slurm's sprio: the waiting jobs you may see in queue order, each with what places it
    there (its class's value, the points waiting added, its team's dominant share, its runtime
    limit), as the next cycle orders them (services/job_priority.py; the engine's
    queue_factors)."""

    query_parameters = frozenset({"format", "job"})

    @extend_schema(parameters=[s.JobPriorityQuerySerializer], responses={200: s.JobPrioritySerializer})
    def get(self, request: Request) -> Response:
        query = s.JobPriorityQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = job_priority.priorities(request.user, query.validated_data.get("job") or ())
        return Response(s.JobPrioritySerializer(found).data)


class FairShareView(ApiMixin, APIView):
    """Slurm's sshare: every team's dominant share and its parts (held now, decayed past usage,
    each resource's share), lowest first, as the next cycle orders the queue by them
    (services/fair_share.py; the engine's fairshare)."""

    @extend_schema(responses={200: s.FairShareSerializer})
    def get(self, request: Request) -> Response:
        return Response(s.FairShareSerializer(fair_share.fair_shares()).data)


class SchedulerPolicyView(ApiMixin, APIView):
    """The scheduling policy in force (`scontrol show config`): the engine's settings as the
    loop runs them, the loop's timings, and the leader now (services/scheduler_policy.py)."""

    @extend_schema(responses={200: s.SchedulerPolicySerializer})
    def get(self, request: Request) -> Response:
        return Response(s.SchedulerPolicySerializer(scheduler_policy.policy()).data)


class EtaMetricsView(ApiMixin, APIView):
    """How far the ETAs told to waiting jobs held: of the jobs that started in the last `days`
    (default 7) after waiting with an ETA, the share that started by the first one told, and by
    how much sooner or later; the same per size class (services/eta_record.py)."""

    query_parameters = frozenset({"format", "days"})

    @extend_schema(parameters=[s.EtaRecordQuerySerializer], responses={200: s.EtaRecordSerializer})
    def get(self, request: Request) -> Response:
        query = s.EtaRecordQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        return Response(s.EtaRecordSerializer(eta_record.track_record(days=query.validated_data["days"])).data)


class FragmentationMetricsView(ApiMixin, APIView):
    """Free GPUs per pool, the largest free block, and GPUs stranded by fragmentation."""

    @extend_schema(responses={200: s.FragmentationMetricsSerializer})
    def get(self, request: Request) -> Response:
        return Response(s.FragmentationMetricsSerializer(fleet_figures.fragmentation_figures()).data)
