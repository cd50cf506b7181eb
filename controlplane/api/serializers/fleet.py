"""Fleet and teams: teams, projects, cohorts, quotas, priority classes, GPU types, price rates,
nodes and their actions' answers, the audit trail's events, and what a DELETE took with it."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from controlplane.api.serializers.fields import (
    MAX_INT,
    ConstraintCheckedModelSerializer,
    FractionalDecimalField,
    FractionalNumberField,
    HoldReasonField,
    NamedRecordField,
    StrictFieldsMixin,
    WholeNumberField,
    ZonedDateTimeField,
    one_rule_field_mapping,
)
from controlplane.api.serializers.sentences import said
from controlplane.models import Cohort, Event, GpuType, Node, PriceRate, PriorityClass, Project, Quota, Team
from controlplane.models.fleet import (
    GPU_MEMORY_WORDS,
    MAX_GPU_MEMORY_GB,
    MIN_GPU_MEMORY_GB,
    PRICE_HORIZON_YEARS,
)
from controlplane.models.jobs import HOLD_REASON_MAX_LENGTH
from controlplane.models.quotas import MAX_QUOTA_GPUS, PAST_QUOTA_CEILING
from controlplane.models.teams import team_classes_problem
from controlplane.services import job_mentions, nodes, quotas


class DeletedSerializer(serializers.Serializer):
    """The answer to a DELETE that changed more than the record deleted."""

    detail = serializers.CharField(help_text="What was deleted and what that did, in one sentence.")
    consequences = serializers.ListField(
        child=serializers.CharField(),
        help_text="One line per record the deletion changed or took with it: a cohort's teams leaving it (and what "
                  "becomes of GPUs they run above their nominal), a team's quotas, projects and memberships, a GPU "
                  "type's prices, the teams whose default class it was.")


class TeamSerializer(ConstraintCheckedModelSerializer):
    cohort = NamedRecordField(slug_field="name", queryset=Cohort.objects.all(), required=False, allow_null=True,
                              lists_names=True)
    default_priority_class = NamedRecordField(
        slug_field="name", queryset=PriorityClass.objects.all(), required=False, allow_null=True, lists_names=True
    )

    priority_classes = NamedRecordField(
        slug_field="name", queryset=PriorityClass.objects.all(), many=True, required=False, lists_names=True,
        help_text="The classes the team's members may submit in and change their jobs to; [] (the default): every "
                  "class. Admins may use any class for any team.")
    limits_cleared = serializers.SerializerMethodField(
        help_text="In the answer to a change that took the team out of its cohort: the borrowing and lending "
                  "limits cleared from its quotas, one line per quota (\"H100-80GB: borrowing limit 8\"), as its "
                  "TeamCohortChanged event says; empty otherwise.")
    warnings = serializers.SerializerMethodField(
        help_text="In the answer to a change that moved the team's cohort: per GPU type it holds more of than its "
                  "nominal quota, what becomes of those GPUs (its running jobs keep them; who may reclaim them by "
                  "preemption; whether it may start more), as the admin's team page says; empty otherwise.")

    class Meta:
        model = Team
        fields = ["id", "name", "description", "cohort", "default_priority_class", "priority_classes",
                  "limits_cleared", "warnings"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        classes = attrs.pop("priority_classes", None)  # many to many: not set on the unsaved candidate
        attrs = super().validate(attrs)
        default = attrs.get("default_priority_class", getattr(self.instance, "default_priority_class", None))
        chosen = classes if classes is not None else (
            list(self.instance.priority_classes.all()) if self.instance is not None else [])
        if problem := team_classes_problem(default, chosen):
            raise serializers.ValidationError({"default_priority_class": [problem]})
        if classes is not None:
            attrs["priority_classes"] = classes
        return attrs

    def get_limits_cleared(self, team: Team) -> list[str]:
        return list(getattr(team, "limits_cleared_now", []))

    def get_warnings(self, team: Team) -> list[str]:
        return list(getattr(team, "warnings_now", []))


class ProjectSerializer(ConstraintCheckedModelSerializer):
    team = NamedRecordField(slug_field="name", queryset=Team.objects.all())

    class Meta:
        model = Project
        fields = ["id", "team", "name", "description"]
        validators: list[Any] = []  # a second of one name: Project.clean() says it on the name


class CohortSerializer(ConstraintCheckedModelSerializer):
    teams = NamedRecordField(slug_field="name", many=True, read_only=True)

    class Meta:
        model = Cohort
        fields = ["id", "name", "description", "teams"]
        set_elsewhere = {"teams": "a team joins a cohort through its own cohort field (PATCH teams/{id}/ {\"cohort\": …})"}


class QuotaSerializer(ConstraintCheckedModelSerializer):
    team = NamedRecordField(slug_field="name", queryset=Team.objects.all())
    gpu_type = NamedRecordField(slug_field="name", queryset=GpuType.objects.all(), lists_names=True)
    cohort = serializers.SerializerMethodField(help_text="The team's cohort, whose members lend and borrow; null if none.")
    held_gpus = serializers.SerializerMethodField(help_text="GPUs of this type the team's running jobs hold now.")
    borrowed_gpus = serializers.SerializerMethodField(
        help_text="Of held_gpus, how many are above nominal: borrowed from the cohort, reclaimable by preemption.")
    lent_gpus = serializers.SerializerMethodField(
        help_text="GPUs of its unused nominal quota that other teams of its cohort run on now (the teams "
                  "page's and the admin's 'lent'; a share when several teams lend, hence one decimal); above its "
                  "lending_limit when the limit was lowered under running borrowers, who keep them until it reclaims "
                  "them.")
    warnings = serializers.SerializerMethodField(
        help_text="What this quota means that may not be meant, against the fleet's GPUs of its type (every node "
                  "not retired): a nominal or borrowing limit above them, and all teams' nominal quotas of the type "
                  "adding up past them. Taken, not refused: capacity may be coming ([] when none). In the answer to "
                  "a change of the nominal or borrowing limit that leaves the team holding more than its nominal: "
                  "how many, that its running jobs keep them, and who may reclaim them by preemption; of a change "
                  "of the lending limit or nominal that leaves the team lending more than its lending limit: how "
                  "many beyond it, and that they come back when the team reclaims them (preempting borrowers "
                  "first).")

    class Meta:
        model = Quota
        fields = [
            "id", "team", "gpu_type", "nominal_gpus", "borrowing_limit", "lending_limit",
            "cohort", "held_gpus", "borrowed_gpus", "lent_gpus", "warnings",
        ]
        # A second quota for one team and GPU type is refused by Quota.clean() on the field, naming
        # the quota to change (DRF's unique-together check said it on no field).
        validators: list[Any] = []
        # The quota's ceiling, not the integer column's: a figure past 2147483647 was told "less
        # than or equal to 2147483647", one under it the ceiling (Quota.clean()). Said without the
        # figure, which a JSON 1e30 and its digits would give two ways.
        extra_kwargs = {name: {"max_value": MAX_QUOTA_GPUS,
                               "error_messages": {"max_value": f"This figure {PAST_QUOTA_CEILING}."}}
                        for name in ("nominal_gpus", "borrowing_limit", "lending_limit")}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A nominal lowered below the quota's stored lending limit is refused on `nominal_gpus`,
        the field sent (Quota.clean() names `lending_limit`, which the request did not touch)."""
        nominal, lending = attrs.get("nominal_gpus"), getattr(self.instance, "lending_limit", None)
        if (self.instance is not None and nominal is not None and "lending_limit" not in attrs
                and lending is not None and lending > nominal):
            raise serializers.ValidationError({"nominal_gpus": (
                f"{nominal} is below this quota's lending_limit ({lending}): a team lends only its unused nominal "
                f"quota; lower lending_limit in the same request, or set it to null to lend all of it")})
        return super().validate(attrs)

    def get_cohort(self, obj: Quota) -> str | None:
        return obj.team.cohort.name if obj.team.cohort_id is not None else None

    def get_held_gpus(self, obj: Quota) -> int:
        return quotas.held_gpus(obj)

    def get_borrowed_gpus(self, obj: Quota) -> int:
        return max(0, quotas.held_gpus(obj) - obj.nominal_gpus)

    def get_lent_gpus(self, obj: Quota) -> float:
        # once per response, not per quota: the split is two queries over the whole fleet
        lent = self.context.get("lent_now")
        if lent is None:
            lent = self.context["lent_now"] = quotas.lent_now()
        return round(lent.get((obj.team_id, obj.gpu_type_id), 0.0), 1)

    def get_warnings(self, obj: Quota) -> list[str]:
        guaranteed = self.context.get("_guaranteed_gpus")
        if guaranteed is None:
            guaranteed = self.context["_guaranteed_gpus"] = quotas.guaranteed_by_type()
        warnings = quotas.above_fleet_warnings(obj, self._fleet_gpus(), guaranteed)
        # set by the write that answers
        said = [getattr(obj, "held_above_nominal_now", None), getattr(obj, "lent_beyond_limit_now", None)]
        return [*(w for w in said if w), *warnings]

    def _fleet_gpus(self) -> dict[int, int]:
        # The fleet's GPUs per type, read once per answer for `warnings` (a list's rows share the
        # serializer's context).
        fleet: dict[int, int] | None = self.context.get("_fleet_gpus")
        if fleet is None:
            fleet = self.context["_fleet_gpus"] = quotas.fleet_gpus_by_type()
        return fleet


class PriorityClassSerializer(ConstraintCheckedModelSerializer):
    same_value_as = serializers.SerializerMethodField(
        help_text="The other classes with this value: allowed, but no job of one preempts another's for priority "
                  "and their waiting jobs are not ordered by class ([] when none).")
    warnings = serializers.SerializerMethodField(
        help_text="What this class's settings mean that may not be meant: a value shared with other classes, a "
                  "preemption budget of 0 (its jobs are never preempted, borrowed GPUs included); in the answer to a "
                  "change that lowered max_runtime_limit_s under the limits of unfinished jobs of the class, those "
                  "jobs (they keep their limits); of one that lowered preemption_budget under what unfinished jobs of "
                  "the class already used in the window, those jobs and until when they are not preempted.")

    class Meta:
        model = PriorityClass
        fields = [
            "id", "name", "value", "description", "preemptible", "may_preempt_lower", "grace_period_s",
            "min_runtime_s", "preemption_budget", "budget_window_s", "default_runtime_limit_s", "max_runtime_limit_s",
            "same_value_as", "warnings",
        ]
        extra_kwargs = {"value": {"min_value": -MAX_INT - 1, "max_value": MAX_INT}}

    def get_same_value_as(self, obj: PriorityClass) -> list[str]:
        # Every class's value, read once per answer (a list's rows share the serializer's context).
        by_value = self.context.get("_class_names_by_value")
        if by_value is None:
            by_value = self.context["_class_names_by_value"] = {}
            for value, name in PriorityClass.objects.order_by("name").values_list("value", "name"):
                by_value.setdefault(value, []).append(name)
        return [name for name in by_value.get(obj.value, ()) if name != obj.name]

    def get_warnings(self, obj: PriorityClass) -> list[str]:
        warnings = (obj.value_shared_warning(self.get_same_value_as(obj)), obj.budget_warning())
        said = [f"{warning}." for warning in warnings if warning]
        # set by the write that answers
        now = [getattr(obj, "budget_spent_now", ""), getattr(obj, "beyond_maximum_now", None)]
        return [*said, *(w for w in now if w)]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        default = attrs.get("default_runtime_limit_s", getattr(self.instance, "default_runtime_limit_s", 4 * 3600))
        most = attrs.get("max_runtime_limit_s", getattr(self.instance, "max_runtime_limit_s", 7 * 86400))
        if default > most:
            raise serializers.ValidationError(
                {"default_runtime_limit_s": f"{default} s is beyond max_runtime_limit_s ({most} s)"}
            )
        return super().validate(attrs)


class GpuTypeSerializer(ConstraintCheckedModelSerializer):
    relative_throughput = FractionalNumberField(min_value=0.001, max_value=1e6, required=False)
    memory_gb = WholeNumberField(
        min_value=MIN_GPU_MEMORY_GB, max_value=MAX_GPU_MEMORY_GB, help_text="Memory of one GPU, in GB.",
        error_messages={"min_value": GPU_MEMORY_WORDS, "max_value": GPU_MEMORY_WORDS})

    class Meta:
        model = GpuType
        fields = ["id", "name", "memory_gb", "relative_throughput"]


class PriceRateSerializer(ConstraintCheckedModelSerializer):
    gpu_type = NamedRecordField(slug_field="name", queryset=GpuType.objects.all())
    usd_per_gpu_hour = FractionalDecimalField(max_digits=10, decimal_places=4, min_value=0)
    effective_from = ZonedDateTimeField(
        help_text="From when the price holds: an RFC 3339 instant with its time zone (2026-12-01T00:00:00Z, "
                  "…-05:00); a time without one is refused, as is one more than "
                  f"{PRICE_HORIZON_YEARS} years from now.")

    class Meta:
        model = PriceRate
        fields = ["id", "gpu_type", "capacity_tier", "usd_per_gpu_hour", "effective_from"]
        validators: list[Any] = []  # a second from one start: PriceRate.clean() says it on effective_from


class NodeSerializer(ConstraintCheckedModelSerializer):
    gpu_type = NamedRecordField(slug_field="name", queryset=GpuType.objects.all(), lists_names=True)
    allocated_gpus = WholeNumberField(read_only=True, help_text="GPUs held by live allocations now.")
    # Read-only, no default: DRF puts a read-only field's default into the data it saves (a PUT of
    # the node as read answered 500).
    maintenance_window = WholeNumberField(
        read_only=True, allow_null=True,
        help_text="The maintenance window holding the node now (it takes no work until it ends); null: none.")
    maintenance_ends_at = serializers.DateTimeField(read_only=True, allow_null=True,
                                                    help_text="When that window ends; null: none.")
    cordon_reason = serializers.CharField(
        read_only=True, allow_null=True,
        help_text="While the node takes no work by an operator's cordon or drain: why, as given with it (\"\" when "
                  "none was); null while it takes work.")

    class Meta:
        model = Node
        fields = [
            "id", "name", "pool", "gpu_type", "gpu_count", "cpus", "memory_gb", "leaf_switch", "spine",
            "capacity_tier", "state", "unschedulable", "allocated_gpus", "agent_lease_expires_at", "last_heartbeat_at",
            "simulated", "retired_at", "maintenance_window", "maintenance_ends_at", "cordon_reason",
        ]
        read_only_fields = ["state", "unschedulable", "agent_lease_expires_at", "last_heartbeat_at", "retired_at"]
        extra_kwargs = {"gpu_count": {"min_value": 1, "max_value": 1024}}
        set_elsewhere = {"state": "use the node's cordon, drain and uncordon actions, retire (POST nodes/{id}/retire/) "
                                  "and return (POST nodes/{id}/return/); the control loop sets down, suspect and "
                                  "quarantined",
                         "unschedulable": "use the node's cordon, drain and uncordon actions",
                         "retired_at": "set when an admin retires the node: retire (POST nodes/{id}/retire/); "
                                       "cleared by return (POST nodes/{id}/return/)",
                         "agent_lease_expires_at": "the node's agent renews its lease with every heartbeat",
                         "last_heartbeat_at": "the node's agent reports it with every heartbeat",
                         "allocated_gpus": "counted from the node's live allocations",
                         "maintenance_window": "schedule maintenance with maintenance-windows/",
                         "maintenance_ends_at": "schedule maintenance with maintenance-windows/",
                         "cordon_reason": "give it with the cordon or drain: POST nodes/{id}/drain/ "
                                          "{\"reason\": \"…\"}"}

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A node's GPU type and count do not change under its running work, nor its CPUs and
        memory below what that work holds (services/nodes.py, as the admin's node page): each
        refusal names its field and the jobs holding the GPUs."""
        refused: dict[str, str] = {}
        if self.instance is not None:
            for name, rule in (("gpu_type", nodes.gpu_type_refusal), ("gpu_count", nodes.gpu_count_refusal)):
                refusal = rule(self.instance, attrs[name]) if name in attrs else None
                if refusal:
                    refused[name] = refusal
            for name in ("cpus", "memory_gb"):
                refusal = nodes.host_refusal(self.instance, name, attrs[name]) if name in attrs else None
                if refusal:
                    refused[name] = refusal
        if refused:
            raise serializers.ValidationError(refused)
        return super().validate(attrs)


class NodeActionSerializer(StrictFieldsMixin, serializers.Serializer):
    """`POST nodes/{id}/cordon/` and `drain/`: why (optional), as Slurm's `Reason=`."""

    reason = HoldReasonField(help_text="Why the node is taken out of service, in your words (one line, at most "
                                       f"{HOLD_REASON_MAX_LENGTH} characters): in its node.state event and its "
                                       "cordon_reason until it is uncordoned.")


class NodeRunningJobSerializer(serializers.Serializer):
    id = WholeNumberField()
    name = serializers.CharField()
    team = serializers.CharField()
    gpus = WholeNumberField(help_text="GPUs it holds on this node.")
    other_nodes = serializers.ListField(child=serializers.CharField(), help_text="The other nodes of its gang.")
    stopping = serializers.BooleanField(help_text="Told to stop (preempted, cancelled, requeued, timed out).")
    holds_until = serializers.DateTimeField(help_text="The latest it holds the node: its start plus its runtime "
                                                      "limit, or its stop deadline when stopping.")


def node_running_job(job: Any) -> dict[str, Any]:
    return {"id": job.job_id, "name": job.name, "team": job.team, "gpus": job.gpus_here,
            "other_nodes": list(job.other_nodes), "stopping": job.stopping,
            "holds_until": serializers.DateTimeField().to_representation(job.holds_until)}


class NodeActionResultSerializer(NodeSerializer):
    """A node action's answer: the node after it, and what it did."""

    changed = serializers.BooleanField(help_text="False when the node was already so (nothing recorded).")
    detail = serializers.CharField(read_only=True,
                                   help_text="What was done, in one sentence: the states before and after, and for "
                                             "a cordon or drain the jobs left running there and until when.")
    running_jobs = NodeRunningJobSerializer(many=True, help_text="After a cordon or drain: the jobs holding GPUs "
                                                                 "there now, those holding them longest last.")

    class Meta(NodeSerializer.Meta):
        fields = [*NodeSerializer.Meta.fields, "changed", "detail", "running_jobs"]


class EventListSerializer(serializers.ListSerializer):
    """A page of events: the teams of the jobs their messages name are read in one query."""

    def to_representation(self, data: Any) -> list[Any]:
        events = list(data.all() if hasattr(data, "all") else data)
        job_mentions.prefetch(event.message for event in events)
        return super().to_representation(events)  # type: ignore[no-any-return]


class EventSerializer(serializers.ModelSerializer):
    serializer_field_mapping = one_rule_field_mapping(serializers.ModelSerializer.serializer_field_mapping)
    node = NamedRecordField(slug_field="name", read_only=True, allow_null=True)
    team = NamedRecordField(slug_field="name", read_only=True, allow_null=True)
    data = serializers.DictField(read_only=True)
    message = serializers.SerializerMethodField(help_text="What happened, in words (engine times said in UTC).")

    def get_message(self, event: Event) -> str:
        return said(event.message)

    class Meta:
        model = Event
        list_serializer_class = EventListSerializer
        fields = ["id", "created_at", "kind", "actor", "reason", "message", "job", "allocation", "node", "team",
                  "epoch", "data"]
        read_only_fields = fields
