"""/api/v1/notification-hooks/: a user's webhooks for their jobs' events (services/notifications.py).

    GET    notification-hooks/              your hooks (admins: everyone's, ?user=NAME for one user's)
    POST   notification-hooks/              {"url", "events": [...], "team"?: name, "secret"?, "active"?}
    GET    notification-hooks/{id}/         one, with its state in words (`status`, `failing`)
    PUT    notification-hooks/{id}/         replace it: url, events, team, active all given (secret may be left out)
    PATCH  notification-hooks/{id}/         change url, events, team, secret, active (the URL checked as on a POST)
    DELETE notification-hooks/{id}/         remove it and its queued deliveries
    POST   notification-hooks/{id}/rotate-secret/  a new random secret, shown in this answer only
    POST   notification-hooks/{id}/test/    POST a test notification now; says what the receiver answered
    GET    notification-hooks/{id}/deliveries/  its last 50 deliveries, newest first
    GET    notification-hooks/{id}/history/     its changes (created, changed), newest first: who, when, what

A hook of another user is a 404 (admins see and change every hook, but only ever create their
own), its history too. The secret is shown once, in the answer to the POST that created it (or the PATCH that
set it, or the rotate-secret that drew a new one); receivers check `X-Quartermaster-Signature`
with it. Every creation, change and deletion is a `config.changed` event (services/notifications,
`record_hook_change`).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Count, Q, QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.filter_backends import refuse_repeated_parameters
from controlplane.api.serializers.fields import (
    PutReplacesWholeMixin,
    TextField,
    WholeNumberField,
    no_record_named,
    one_rule_field_mapping,
)
from controlplane.api.views.api_mixin import ApiMixin, refuse_fields
from controlplane.filtersets import FREE_TEXT_MAX_LENGTH, PlainTextFormField, column_length
from controlplane.models import NotificationDelivery, NotificationHook, Team
from controlplane.services import access, notifications


class NotificationHookSerializer(PutReplacesWholeMixin, serializers.ModelSerializer):
    serializer_field_mapping = one_rule_field_mapping(serializers.ModelSerializer.serializer_field_mapping)
    user = serializers.CharField(source="user.username", read_only=True)
    team = TextField(required=False, allow_null=True, allow_blank=True, max_length=64,
                     help_text="A team's name: every job of that team; null/absent: your own jobs.")
    events = serializers.ListField(child=TextField(max_length=40), max_length=20,
                                   help_text="started, succeeded, failed, timed_out, cancelled, preempted, "
                                             "requeued, unschedulable, borrowed; each once")
    url = TextField(max_length=500, any_character=True)
    secret = TextField(write_only=True, required=False, min_length=16, max_length=128, any_character=True,
                       help_text="Key of the signature (default: a random one, shown once).")
    failing = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField()
    waiting_deliveries = serializers.SerializerMethodField()
    deliverable = serializers.SerializerMethodField(
        help_text="false when every POST to this URL is refused here now (the sender's own rule), whatever the "
                  "receiver would answer: undeliverable_reason says why and what to do.")
    undeliverable_reason = serializers.SerializerMethodField()

    class Meta:
        model = NotificationHook
        fields = ["id", "user", "url", "events", "team", "secret", "active", "created_at", "last_delivery_at",
                  "last_status", "consecutive_failures", "failing", "status", "waiting_deliveries", "deliverable",
                  "undeliverable_reason"]
        read_only_fields = ["created_at", "last_delivery_at", "last_status", "consecutive_failures"]

    def to_representation(self, instance: NotificationHook) -> dict[str, Any]:
        data = super().to_representation(instance)
        data["team"] = instance.team.name if instance.team_id else None
        shown = getattr(instance, "_show_secret", False)
        if shown:
            data["secret"] = instance.secret
        return data

    def get_failing(self, hook: NotificationHook) -> bool:
        return notifications.health(hook)[0]

    def get_status(self, hook: NotificationHook) -> str:
        return notifications.health(hook, due=getattr(hook, "due", None),
                                    undeliverable=self.get_undeliverable_reason(hook))[1]

    def get_deliverable(self, hook: NotificationHook) -> bool:
        return self.get_undeliverable_reason(hook) is None

    def get_undeliverable_reason(self, hook: NotificationHook) -> str | None:
        """services/notifications.undeliverable_reason, worked out once per hook and answer."""
        if getattr(hook, "_undeliverable_url", None) != hook.url:
            hook._undeliverable = notifications.undeliverable_reason(hook.url)
            hook._undeliverable_url = hook.url
        return hook._undeliverable

    def get_waiting_deliveries(self, hook: NotificationHook) -> int:
        return int(getattr(hook, "due", 0) or 0)

    def validate_url(self, value: str) -> str:
        value = value.strip()
        problem = notifications.url_problem(value)
        if problem is not None:
            raise ValidationError(problem)
        return value

    def validate_events(self, value: list[str]) -> list[str]:
        problem = notifications.events_problem(value)
        if problem is not None:
            raise ValidationError(problem)
        return value

    def validate_team(self, value: str | None) -> Team | None:
        """A team the hook's owner may read: the caller on a POST; on a PATCH the hook's user (an
        admin changing a member's hook may not make it follow a team the member is not in)."""
        if not value:
            return None
        team = Team.objects.filter(name=value).first()
        request = self.context["request"]
        owner = self.instance.user if isinstance(self.instance, NotificationHook) else request.user
        who = access.access_of(owner)
        if team is None or not who.may_read_team(team.pk):
            mine = sorted(Team.objects.filter(pk__in=who.team_ids).values_list("name", flat=True))
            if owner.pk == request.user.pk:
                raise ValidationError(
                    f"you are not in a team named '{value[:64]}': give one of yours "
                    f"({', '.join(mine) or 'you have none'}), or leave team out for your own jobs.")
            raise ValidationError(
                f"{owner.get_username()}, whose hook this is, is not in a team named '{value[:64]}': give one of "
                f"theirs ({', '.join(mine) or 'they have none'}), or null for their own jobs.")
        return team


#: A hook's deliveries and history: one bounded list (the last 50, the last 100), unpaginated, as
#: docs/api.md and `qm notify history` read it; `limit` and `offset` are refused, not ignored.
ONE_LIST: dict[str, Any] = {"pagination_class": None, "query_parameters": frozenset({"format"})}


class NotificationHookViewSet(ApiMixin, viewsets.ModelViewSet):
    queryset = NotificationHook.objects.none()  # the schema's model; requests read get_queryset
    serializer_class = NotificationHookSerializer
    filterset_class = None
    #: a hook, its changes and its actions take only `format` (ApiMixin refuses any other); the
    #: list alone takes `user` and its page's `limit` and `offset` (LIST_PARAMETERS, checked in list)
    query_parameters = frozenset({"format"})
    LIST_PARAMETERS = frozenset({"format", "user", "limit", "offset"})

    def get_queryset(self) -> QuerySet[NotificationHook]:
        if getattr(self, "swagger_fake_view", False):
            return NotificationHook.objects.none()
        hooks = NotificationHook.objects.select_related("user", "team").annotate(
            due=Count("deliveries", filter=Q(deliveries__next_attempt_at__isnull=False)))
        if not access.access_of(self.request.user).is_admin:
            return hooks.filter(user=self.request.user)
        user = self.request.query_params.get("user") if getattr(self, "action", None) == "list" else None
        return hooks.filter(user__username=user) if user else hooks

    @extend_schema(parameters=[OpenApiParameter(
        "user", str, description="Admins: only this user's hooks (a username). Others always list their own.")])
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        unknown = sorted(set(request.query_params) - self.LIST_PARAMETERS)
        if unknown:
            raise ValidationError({unknown[0]: [f"not a parameter of this list: use {', '.join(sorted(self.LIST_PARAMETERS))}."]})
        refuse_repeated_parameters(request)  # `?user=alice&user=bob` listed bob's alone
        # No username holds a control character (PostgreSQL cannot even compare text with a NUL:
        # a DataError, a 500) nor is longer than the column: refused as the filtersets refuse them.
        longest, why = column_length(get_user_model(), "username") or (FREE_TEXT_MAX_LENGTH, "")
        try:
            PlainTextFormField(required=False, strip=False, longest=longest, longest_why=why).clean(
                request.query_params.get("user", ""))
        except forms.ValidationError as refused:
            raise ValidationError({"user": refused.messages}) from None
        user = request.query_params.get("user")
        if user and access.access_of(request.user).is_admin:
            users = get_user_model().objects.all()
            if not users.filter(username=user).exists():
                # a typo listed nothing and read as "this user has no hooks"
                raise ValidationError({"user": [no_record_named(users, user, slug_field="username") + "."]})
        return super().list(request, *args, **kwargs)

    def _actor(self) -> str:
        return f"user:{self.request.user.get_username()}"

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        """An answer that shows a hook's secret is kept by no browser or proxy."""
        response = super().finalize_response(request, response, *args, **kwargs)
        if isinstance(getattr(response, "data", None), dict) and "secret" in response.data:
            response["Cache-Control"] = "no-store"
        return response

    def perform_create(self, serializer: Any) -> None:
        data = serializer.validated_data
        hook = notifications.create_hook(self.request.user, url=data["url"], events=data["events"],
                                         team=data.get("team"), secret=data.get("secret"),
                                         active=data.get("active", True), actor=self._actor())
        hook._show_secret = True
        hook.due = 0
        serializer.instance = hook

    def perform_update(self, serializer: Any) -> None:
        """The changes checked (the URL as on creation: `url_problem`), then written and recorded
        in one transaction (services/notifications.change_hook)."""
        try:
            hook = notifications.change_hook(serializer.instance, dict(serializer.validated_data),
                                             actor=self._actor())
        except NotificationHook.DoesNotExist:
            raise NotFound(f"Hook {serializer.instance.pk} was deleted meanwhile: nothing was changed.") from None
        hook._show_secret = "secret" in serializer.validated_data
        hook.due = getattr(serializer.instance, "due", 0)
        serializer.instance = hook

    def perform_destroy(self, instance: NotificationHook) -> None:
        if not notifications.delete_hook(instance, actor=self._actor()):
            raise NotFound(f"Hook {instance.pk} was deleted meanwhile.")

    def get_success_headers(self, data: Any) -> dict[str, str]:
        """No Location: DRF's would be the body's `url`, which here is the receiver's address, not
        this hook's (and a URL a header cannot hold made the answer a 500 after the hook was
        written). The other resources' creates send none either."""
        return {}

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        response = super().create(request, *args, **kwargs)
        response.status_code = status.HTTP_201_CREATED
        return response

    @extend_schema(request=None, responses=NotificationHookSerializer)
    @action(detail=True, methods=["post"], url_path="rotate-secret")
    def rotate_secret(self, request: Request, pk: str | None = None) -> Response:
        """Replace the hook's signing secret with a new random one, shown in this answer only.
        The old secret stops at once: every POST from now on (retries of older deliveries too)
        is signed with the new one."""
        # whose hook it is first: another user's is a 404 whatever the body (a body no parser
        # takes was a 415, which said the hook exists)
        hook = self.get_object()
        refuse_fields(request, "rotate-secret takes no fields: it makes a random secret; to give the hook a secret "
                               "of your own, PATCH it with {\"secret\": …}")
        try:
            rotated = notifications.rotate_secret(hook, actor=self._actor())
        except NotificationHook.DoesNotExist:
            raise NotFound(f"Hook {hook.pk} was deleted meanwhile: no new secret.") from None
        rotated._show_secret = True
        rotated.due = getattr(hook, "due", 0)
        return Response(self.get_serializer(rotated).data)

    @extend_schema(request=None, responses=inline_serializer("NotificationTest", {
        "delivered": serializers.BooleanField(), "status": WholeNumberField(allow_null=True),
        "detail": serializers.CharField(), "delivery": WholeNumberField(),
        "seconds": serializers.FloatField()}))
    @action(detail=True, methods=["post"])
    def test(self, request: Request, pk: str | None = None) -> Response:
        """POST a test notification to the hook now (not retried) and say what came back."""
        hook = self.get_object()  # another user's hook is a 404 whatever the body
        refuse_fields(request, "test takes no fields: it sends the hook's own test notification")
        try:
            row, outcome = notifications.send_test(hook, actor=f"user:{request.user.get_username()}")
        except NotificationHook.DoesNotExist:
            raise NotFound(f"Hook {hook.pk} was deleted meanwhile: nothing was sent.") from None
        except notifications.DeletedWhileTesting as gone:
            raise NotFound(f"Hook {hook.pk} was deleted while its test notification was sent: the receiver "
                           f"answered {gone.outcome.words}, and nothing of it is kept.") from None
        detail = (f"Delivered: the receiver answered {outcome.words} in {outcome.seconds:.2f} s." if outcome.ok
                  else f"Not delivered: {outcome.words}. Check the URL and that the receiver is up, then test again.")
        return Response({"delivered": outcome.ok, "status": outcome.status, "detail": detail, "delivery": row.pk,
                         "seconds": round(outcome.seconds, 3)})

    @extend_schema(responses=inline_serializer("NotificationDeliveryRow", {
        "id": WholeNumberField(), "event": serializers.CharField(),
        "job_id": WholeNumberField(allow_null=True), "created_at": serializers.DateTimeField(),
        "attempts": WholeNumberField(), "delivered_at": serializers.DateTimeField(allow_null=True),
        "next_attempt_at": serializers.DateTimeField(allow_null=True),
        "last_status": WholeNumberField(allow_null=True), "last_error": serializers.CharField(),
        "text": serializers.CharField()}, many=True))
    # A list, not a page (the schema said one, with limit and offset, which it ignored): ONE_LIST.
    @action(detail=True, methods=["get"], **ONE_LIST)
    def deliveries(self, request: Request, pk: str | None = None) -> Response:
        """The hook's last 50 deliveries, newest first: sent, waiting (next_attempt_at) or given up."""
        hook = self.get_object()
        rows = NotificationDelivery.objects.filter(hook=hook).order_by("-id")[:50]
        return Response([{
            "id": r.pk, "event": r.event, "job_id": r.job_id, "created_at": r.created_at, "attempts": r.attempts,
            "delivered_at": r.delivered_at, "next_attempt_at": r.next_attempt_at, "last_status": r.last_status,
            "last_error": r.last_error, "text": str((r.payload or {}).get("text", "")),
        } for r in rows])

    @extend_schema(responses=inline_serializer("NotificationHookChange", {
        "id": WholeNumberField(help_text="The config.changed event's id."),
        "at": serializers.DateTimeField(), "actor": serializers.CharField(help_text="user:alice, user:root, ..."),
        "change": serializers.ChoiceField(choices=["created", "changed", "deleted"]),
        "message": serializers.CharField(help_text="The event's sentence, the URL masked."),
        "before": serializers.DictField(allow_null=True, help_text="The hook before: user, team, url (masked), "
                                                                  "url_digest, events, active; null on creation."),
        "after": serializers.DictField(allow_null=True),
        "secret": serializers.CharField(allow_null=True, help_text="generated or given when the signing secret "
                                                                   "was replaced (never its value), else null.")},
        many=True))
    @action(detail=True, methods=["get"], **ONE_LIST)
    def history(self, request: Request, pk: str | None = None) -> Response:
        """The hook's changes, newest first (at most 100): who created it, changed its URL, events,
        team, pause or secret, and when, from the API, `qm notify`, the page or the admin UI. As
        the audit trail records them: the URL masked, the secret never (only that it was replaced).
        Whoever may read the hook may read its history; another user's hook is a 404."""
        hook = self.get_object()
        return Response([{
            "id": e.id, "at": e.at, "actor": e.actor, "change": e.change, "message": e.message,
            "before": e.before, "after": e.after, "secret": e.secret,
        } for e in notifications.hook_history(hook)])
