"""Fleet and teams: teams, projects, cohorts, quotas, priority classes, GPU types and price rates,
which everyone signed in reads within their scope and admins write (AdminWritableViewSet);
nodes and their actions; the audit trail's events."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from django.db.models import (
    Count,
    IntegerField,
    OuterRef,
    ProtectedError,
    QuerySet,
    RestrictedError,
    Subquery,
    Value,
)
from django.db.models.functions import Coalesce
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from controlplane.api.errors import Conflict, refused_deletion
from controlplane.api.permissions import IsAdmin, ReadOnlyUnlessAdmin
from controlplane.api.serializers.fleet import (
    CohortSerializer,
    DeletedSerializer,
    EventSerializer,
    GpuTypeSerializer,
    NodeActionResultSerializer,
    NodeActionSerializer,
    NodeSerializer,
    PriceRateSerializer,
    PriorityClassSerializer,
    ProjectSerializer,
    QuotaSerializer,
    TeamSerializer,
    node_running_job,
)
from controlplane.api.views.api_mixin import ApiMixin, action_body, refuse_fields
from controlplane.filtersets import (
    CohortFilterSet,
    EventFilterSet,
    GpuTypeFilterSet,
    NodeFilterSet,
    PriceRateFilterSet,
    PriorityClassFilterSet,
    ProjectFilterSet,
    QuotaFilterSet,
    TeamFilterSet,
)
from controlplane.models import AllocationGpu, Cohort, GpuType, Node, PriceRate, PriorityClass, Quota
from controlplane.services import (
    access,
    cohorts,
    config_audit,
    maintenance,
    nodes,
    preemption_budgets,
    quotas,
)
from controlplane.services import jobs as job_service


class AdminWritableViewSet(ApiMixin, viewsets.ModelViewSet):
    """Everyone signed in reads within their scope; admins write. Writes run in a transaction
    so a failing constraint leaves nothing behind, with their config.changed event
    (services/config_audit.py) for the records it audits."""

    permission_classes = [ReadOnlyUnlessAdmin]

    def _actor(self) -> str:
        return f"user:{self.request.user.get_username()}"

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            return super().create(request, *args, **kwargs)
        except IntegrityError:
            self._judge_again(request, None, partial=False)
            raise

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        partial = kwargs.get("partial", False)
        try:
            with transaction.atomic():
                self._lock_record()
                try:
                    return super().update(request, *args, **kwargs)
                except IntegrityError:  # the save's savepoint is undone; judged under the lock
                    self._judge_again(request, self.get_object(), partial=partial)
                    raise
        except IntegrityError:  # a deferred constraint, checked at the commit
            self._judge_again(request, self.get_object(), partial=partial)
            raise

    def _lock_record(self, *, key: bool = False) -> None:
        """Inside the write's transaction: lock the record's row before it is read for the write
        (the caller's get_object then reads it afresh, or answers 404 once it is gone), so the
        write starts from the row as it is and nothing else writes it until we commit. Before,
        the record was read unlocked and saved whole: a record deleted in between was inserted
        again by the save (200, the record back without what its deletion took with it), a
        column another writer changed in between was written back (a second admin's change to
        another field of a quota; the state, lease and heartbeat of a node the control loop
        wrote), and two deletions at once each recorded one. `key`: for a deletion (FOR UPDATE;
        else FOR NO KEY UPDATE, which leaves rows referring to it free to be written)."""
        instance = self.get_object()
        type(instance)._base_manager.select_for_update(no_key=not key).filter(pk=instance.pk).exists()

    def _judge_again(self, request: Request, instance: Any, *, partial: bool) -> None:
        """A write the serializer's checks passed and the database refused: another request wrote
        the same name (or team and GPU type, …) between the checks and the insert, and its row
        is committed now (the insert waited for it). Judged again, the request is refused on the
        field in the serializer's words ("cohort with this name already exists.") rather than a
        409 quoting the database's constraint ("UNIQUE constraint failed: controlplane_cohort.
        name"); a refusal the checks still cannot see stays the 409. The failed write's
        transaction (perform_create's atomic block) is rolled back already."""
        serializer = self.get_serializer(instance, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic():
            config_audit.record_config_change(serializer.save(), "created", None, self._actor())

    def perform_update(self, serializer: Any) -> None:
        with transaction.atomic():
            before = config_audit.before_change(serializer.instance)
            config_audit.record_config_change(serializer.save(), "changed", before, self._actor())

    @extend_schema(responses={200: DeletedSerializer, 204: None})
    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """204 when the deletion changed nothing else; else 200 saying what it did to the records
        that stay or went with it, as the admin's confirmation page lists them
        (config_audit.deleted_with: a cohort's teams leave it, a team's quotas go, ...). The
        record is locked first (`_lock_record`): of two deletions at once, the second answers 404
        and records nothing."""
        with transaction.atomic():
            self._lock_record(key=True)
            return self._destroy()

    def _destroy(self) -> Response:
        instance = self.get_object()
        if refusal := config_audit.deletion_refused(instance):
            raise Conflict(refusal + ".")
        lines = config_audit.deleted_with(instance)
        label = str(instance._meta.verbose_name)
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


class TeamViewSet(AdminWritableViewSet):
    """Teams. A team joining, leaving or changing cohort is recorded as a cohort.changed event
    (reason TeamCohortChanged), as cohort changes are."""

    serializer_class = TeamSerializer
    filterset_class = TeamFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        return access.visible_teams(self.request.user).select_related("cohort", "default_priority_class").prefetch_related("priority_classes")

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
            moved = cohorts.record_team_move(team, before, self._actor())
            # the answer says what leaving cleared, as the event does (TeamSerializer.limits_cleared)
            team.limits_cleared_now = moved.data.get("limits_cleared", []) if moved is not None else []
            # and what becomes of GPUs it holds above its nominal, as the admin's team page does
            team.warnings_now = quotas.held_above_nominal_after_move(team, before) if moved is not None else []


class ProjectViewSet(AdminWritableViewSet):
    serializer_class = ProjectSerializer
    filterset_class = ProjectFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        return access.visible_projects(self.request.user).select_related("team")


class CohortViewSet(AdminWritableViewSet):
    """Cohorts: teams that lend each other quota. Every change is recorded as a cohort.changed
    event (reason CohortCreated, CohortChanged or CohortDeleted) with before and after."""

    serializer_class = CohortSerializer
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

    serializer_class = QuotaSerializer
    filterset_class = QuotaFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        return quotas.with_held_gpus(access.visible_quotas(self.request.user).select_related("team__cohort", "gpu_type"))

    def _record(self, quota: Quota, verb: str, before: dict[str, Any] | None) -> None:
        quotas.record_quota_change(quota, verb, before, f"user:{self.request.user.get_username()}")

    def _named_team(self) -> Any:
        return self.request.data.get("team") if isinstance(self.request.data, dict) else None

    def _lock_record(self, *, key: bool = False) -> None:
        # its team's row before its own, as a team's move takes them (quotas.lock_teams_for_quota_write)
        quotas.lock_teams_for_quota_write(quota_pk=self.kwargs.get("pk"), team_name=self._named_team())
        super()._lock_record(key=key)

    def _said(self, quota: Quota, before: dict[str, Any] | None) -> None:
        # The answer says what a change under what the team holds does, as the admin's quota
        # page does on the same change (QuotaSerializer.get_warnings).
        quota.held_above_nominal_now = quotas.held_above_nominal(quota, before)
        quota.lent_beyond_limit_now = quotas.lent_beyond_lending_limit(quota, before)

    def perform_create(self, serializer: Any) -> None:
        with transaction.atomic():
            self._judge_cohort_locked(serializer.validated_data)
            quota = serializer.save()
            self._record(quota, "created", None)
            self._said(quota, None)

    def _judge_cohort_locked(self, attrs: dict[str, Any]) -> None:
        """A new quota's limits judged again against its team's cohort under the team's row lock
        (quotas.lock_teams_for_quota_write): the checks read the team unlocked, and a move out of
        its cohort may have committed since (a change locks the team before its checks)."""
        team = attrs["team"]
        quotas.lock_teams_for_quota_write(team_pk=team.pk)
        team.refresh_from_db(fields=["cohort"])
        candidate = Quota(team=team, borrowing_limit=attrs.get("borrowing_limit"),
                          lending_limit=attrs.get("lending_limit"))
        try:
            candidate._refuse_limits_without_cohort()
        except DjangoValidationError as exc:
            raise ValidationError(exc.message_dict) from None

    def perform_update(self, serializer: Any) -> None:
        with transaction.atomic():
            before = quotas.quota_record(serializer.instance)
            quota = serializer.save()
            if (before["team"], before["gpu_type"]) != (quota.team.name, quota.gpu_type.name):
                # moved: what it read held was the old team's or type's (quotas.with_held_gpus)
                quota.__dict__.pop("held_gpus", None)
            self._record(quota, "changed", before)
            self._said(quota, before)

    def perform_destroy(self, instance: Quota) -> None:
        with transaction.atomic():
            before = quotas.quota_record(instance)
            self._record(instance, "deleted", before)
            instance.delete()


class PriorityClassViewSet(AdminWritableViewSet):
    serializer_class = PriorityClassSerializer
    filterset_class = PriorityClassFilterSet
    queryset = PriorityClass.objects.all()

    def perform_update(self, serializer: Any) -> None:
        """A maximum runtime limit lowered under unfinished jobs' limits is said in the answer
        (PriorityClassSerializer.get_warnings), as on the admin's page: they keep them. So is a
        preemption budget lowered under what unfinished jobs of the class already used in the
        window (services/preemption_budgets.py), which the event records too."""
        most, budget = serializer.instance.max_runtime_limit_s, serializer.instance.preemption_budget
        with transaction.atomic():
            before = config_audit.before_change(serializer.instance)
            priority_class = serializer.save()
            said, spent = preemption_budgets.lowered_under_use(priority_class, budget)
            why, data = preemption_budgets.audit_of(spent)
            config_audit.record_config_change(priority_class, "changed", before, self._actor(), why=why, data=data)
        priority_class.budget_spent_now = said
        if priority_class.max_runtime_limit_s < most:
            priority_class.beyond_maximum_now = job_service.beyond_class_maximum(priority_class)


class GpuTypeViewSet(AdminWritableViewSet):
    serializer_class = GpuTypeSerializer
    filterset_class = GpuTypeFilterSet
    queryset = GpuType.objects.all()


class PriceRateViewSet(AdminWritableViewSet):
    serializer_class = PriceRateSerializer
    filterset_class = PriceRateFilterSet
    queryset = PriceRate.objects.select_related("gpu_type")


class NodeViewSet(AdminWritableViewSet):
    """GPU nodes. State changes go through the cordon, drain, uncordon, retire and return actions
    (admins). A retired node stays listed (filter with ?state=retired, or ?state=ready&state=…)."""

    serializer_class = NodeSerializer
    filterset_class = NodeFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        now = timezone.now()
        # The maintenance window holding the node now, if any (it takes no work until it ends).
        holding = maintenance.active_at(now).filter(nodes=OuterRef("pk")).order_by("end_at", "id")
        # A subquery on the live GPU rows (their partial index), not a join counting every GPU row
        # the node ever had: that join read all of history and left the page's COUNT grouping
        # every node (1.3 s for 1,250 nodes with 776,000 released GPU rows, bench/scale_audit.py).
        live = (AllocationGpu.objects.filter(node=OuterRef("pk"), live=True).order_by()
                .values("node").annotate(n=Count("pk")).values("n"))
        return Node.objects.select_related("gpu_type").annotate(
            allocated_gpus=Coalesce(Subquery(live, output_field=IntegerField()), Value(0)),
            maintenance_window=Subquery(holding.values("id")[:1]),
            maintenance_ends_at=Subquery(holding.values("end_at")[:1]),
            cordon_reason=nodes.cordon_reason(),
        )

    def update(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        with transaction.atomic():
            nodes.lock_before_inventory_change()  # the lease row, then the node's (services/nodes.py)
            return super().update(request, *args, **kwargs)

    def perform_create(self, serializer: Any) -> None:
        super().perform_create(serializer)
        serializer.instance.allocated_gpus = 0  # a new node holds nothing yet
        serializer.instance.maintenance_window = serializer.instance.maintenance_ends_at = None
        serializer.instance.cordon_reason = None

    def _act(self, request: Request, verb: Any) -> Response:
        name = "return" if verb is nodes.return_to_service else verb.__name__
        reason = ""
        if name in nodes.TAKES_REASON:
            body = NodeActionSerializer(data=action_body(request, "send no body, {}, or {\"reason\": \"…\"}"))
            body.is_valid(raise_exception=True)
            reason = str(body.validated_data.get("reason", ""))
        else:
            refuse_fields(request, f"{name} takes no fields (its node.state event records who did it and when)")
        node = self.get_object()
        try:
            done = nodes.act(name, node, request.user, reason=reason)
        except nodes.NodeActionRefused as exc:
            raise Conflict(str(exc)) from exc
        return Response({**NodeSerializer(self.get_queryset().get(pk=node.pk)).data, "changed": done.changed,
                         "detail": done.detail,
                         "running_jobs": [node_running_job(j) for j in done.running_jobs]})

    @extend_schema(request=NodeActionSerializer, responses={200: NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin])
    def cordon(self, request: Request, pk: str | None = None) -> Response:
        """Take no new work; running jobs continue."""
        return self._act(request, nodes.cordon)

    @extend_schema(request=NodeActionSerializer, responses={200: NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin])
    def drain(self, request: Request, pk: str | None = None) -> Response:
        """Take no new work and let running jobs finish."""
        return self._act(request, nodes.drain)

    @extend_schema(request=None, responses={200: NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin])
    def uncordon(self, request: Request, pk: str | None = None) -> Response:
        """Take work again (from cordoned or draining)."""
        return self._act(request, nodes.uncordon)

    @extend_schema(request=None, responses={200: NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin])
    def retire(self, request: Request, pk: str | None = None) -> Response:
        """Take the node out of the fleet for good: no work, no agent, no capacity or idle cost
        from now on. 409 while jobs hold its GPUs (drain it first)."""
        return self._act(request, nodes.retire)

    @extend_schema(request=None, responses={200: NodeActionResultSerializer})
    @action(detail=True, methods=["post"], permission_classes=[IsAdmin], url_path="return", url_name="return")
    def return_to_service(self, request: Request, pk: str | None = None) -> Response:
        """Bring a retired node back: down until its agent registers again (then cordoned)."""
        return self._act(request, nodes.return_to_service)


class EventViewSet(ApiMixin, viewsets.ReadOnlyModelViewSet):
    """The audit trail: admins read all of it, members what happened to their team's jobs."""

    serializer_class = EventSerializer
    filterset_class = EventFilterSet

    def get_queryset(self) -> QuerySet[Any]:
        return access.visible_events(self.request.user).select_related("node", "team")
