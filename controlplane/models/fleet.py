from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone

from controlplane.choices import LIVE_JOB_STATES, CapacityTier, JobState, NodeState
from controlplane.models.names import node_name, visible_name
from controlplane.models.usage import forget_empty_quota_rollups

# The API's bounds (controlplane/api/serializers/fleet.py); the admin's forms check them in clean().
MIN_RELATIVE_THROUGHPUT = 0.001
MAX_RELATIVE_THROUGHPUT = 1e6
MAX_NODE_GPUS = 1024
# A GPU's memory: at least 1 GB; at most 4 TB, some ten times the largest GPU of 2026 (288 GB).
# Jobs pick GPU types by it (min_gpu_memory_gb): 0 matched no job asking for memory, and an
# absurd figure every one.
MIN_GPU_MEMORY_GB = 1
MAX_GPU_MEMORY_GB = 4096
GPU_MEMORY_WORDS = ("a GPU has at least 1 GB of memory and at most 4,096 GB: give its memory in GB, "
                    "e.g. 80 for an H100-80GB")
# A price starts at most this many years from now: room for a contract's prices entered up front
# (a three-year reservation's step-ups), none for a mistyped year (9999-12-31 was taken until 6 Dec).
PRICE_HORIZON_YEARS = 5


def price_horizon(now: datetime) -> datetime:
    """The latest start a price may be given now: the same instant `PRICE_HORIZON_YEARS` on (a
    29 February's on the 28th)."""
    year = now.year + PRICE_HORIZON_YEARS
    try:
        return now.replace(year=year)
    except ValueError:
        return now.replace(year=year, day=28)


class GpuType(models.Model):
    name = models.CharField(max_length=64, unique=True, help_text="e.g. H100-80GB")
    memory_gb = models.PositiveIntegerField("memory (GB)")
    relative_throughput = models.FloatField(default=1.0)

    class Meta:
        ordering = ["name"]
        verbose_name = "GPU type"
        constraints = [
            models.CheckConstraint(condition=Q(relative_throughput__gt=0), name="gpu_type_throughput_positive"),
            # One type per name whatever its case (GpuType.clean says it on the field first).
            models.UniqueConstraint(Lower("name"), name="gpu_type_name_unique_any_case",
                                    violation_error_message="A GPU type has this name but for its case."),
        ]

    def __str__(self) -> str:
        return self.name

    def delete(self, *args: Any, **kwargs: Any) -> tuple[int, dict[str, int]]:
        """Deleted with its empty quota rollups (`forget_empty_quota_rollups`): a type once given
        a quota but never a node has nothing in them, and they alone refused the deletion. Rows
        with something in them still protect the type (PROTECT), as its nodes and jobs' rows do."""
        with transaction.atomic():
            forget_empty_quota_rollups(gpu_type=self)
            return super().delete(*args, **kwargs)

    def clean(self) -> None:
        """The API's bounds, said on the field (the check constraint alone gave the admin form
        "Constraint … is violated" above the form). Memory has no check constraint (it would
        need a migration); this and the API's field bounds refuse 0 and absurd figures."""
        errors = {}
        throughput = self.relative_throughput
        if throughput is not None and not MIN_RELATIVE_THROUGHPUT <= throughput <= MAX_RELATIVE_THROUGHPUT:
            errors["relative_throughput"] = (
                f"{throughput:g} is outside {MIN_RELATIVE_THROUGHPUT:g}–{MAX_RELATIVE_THROUGHPUT:g}: "
                "the GPU's speed relative to the others, e.g. 1.0 for the reference type")
        memory = self.memory_gb
        if memory is not None and not MIN_GPU_MEMORY_GB <= memory <= MAX_GPU_MEMORY_GB:
            errors["memory_gb"] = f"{memory} GB: {GPU_MEMORY_WORDS}"
        if taken := self._name_taken():
            errors["name"] = taken
        elif renamed := self._rename_refused():
            errors["name"] = renamed
        if errors:
            raise ValidationError(errors)

    def _name_taken(self) -> str | None:
        """Another type of this name, whatever its case, refused on the name, naming it. Jobs
        name their GPU types exactly (a submit's `gpu_types`, an agent's registration), so
        "h100-80gb" beside "H100-80GB" was a typo hazard: a submit naming the wrong one waited
        on a type with no nodes (taken until 7 Dec). The unique index on lower(name) refuses it
        in the database too; this says it first, on the field, in words."""
        if not self.name:
            return None
        others = GpuType.objects.filter(name__iexact=self.name)
        other = (others.exclude(pk=self.pk) if self.pk is not None else others).order_by("pk").first()
        if other is None:
            return None
        if other.name == self.name:
            return f"GPU type {other.name} already exists (id {other.pk}): give another name"
        return (f"GPU type {other.name} (id {other.pk}) has this name but for its case: jobs name their GPU types "
                f"exactly, so two names a letter's case apart would be mistaken for each other; use {other.name}, "
                "or give another name")

    def _rename_refused(self) -> str | None:
        """A type in use keeps its name. Jobs ask for GPU types by name (`gpu_types`, a gang
        role's) and node agents register with it, while quotas, prices and nodes point at the
        row: renamed, every job still waiting for the old name read "Can never run on this
        fleet" from the next cycle, and each of its nodes' agents was refused at its next
        registration ("unknown GPU type"). Kueue keeps a ResourceFlavor's name alike. A type no
        live job asks for and no node (not retired) is of is renamed freely: a typo fixed
        before the first node registers. Ended jobs keep the name they asked for, as history."""
        if self.pk is None or not self.name:
            return None
        was = GpuType.objects.filter(pk=self.pk).values_list("name", flat=True).first()
        if was is None or was == self.name:
            return None
        from django.apps import apps  # Job's module imports this one

        job_model = apps.get_model("controlplane", "Job")
        live = job_model.objects.filter(state__in=(JobState.PENDING, *LIVE_JOB_STATES)).filter(
            Q(gpu_types__icontains=f'"{was}"') | Q(roles__icontains=f'"{was}"'))
        asking = sum(1 for types, roles in live.values_list("gpu_types", "roles").iterator()
                     if was in (types or ()) or any(was in (role.get("gpu_types") or ()) for role in roles or ()))
        nodes = list(self.nodes.exclude(state=NodeState.RETIRED).order_by("name").values_list("name", flat=True))
        if not asking and not nodes:
            return None
        said = []
        if asking:
            said.append(f"{asking} job{' that has not ended asks' if asking == 1 else 's that have not ended ask'} "
                        f"for {was} by name (gpu_types): renamed, {'it' if asking == 1 else 'they'} could never run")
        if nodes:
            listed = ", ".join(nodes[:5]) + (f" and {len(nodes) - 5} more" if len(nodes) > 5 else "")
            said.append(f"{len(nodes)} node{'' if len(nodes) == 1 else 's'} ({listed}) "
                        f"{'is' if len(nodes) == 1 else 'are'} of type {was}, whose agents register with that name: "
                        f"renamed, they would be refused at their next registration")
        return ("; ".join(said) + ". A GPU type keeps its name once jobs or nodes use it; to tell different "
                "hardware apart, create another type.")


class PriceRate(models.Model):
    """$/GPU-hour for one GPU type in one capacity tier, in force from `effective_from`."""

    gpu_type = models.ForeignKey(GpuType, on_delete=models.CASCADE, related_name="price_rates",
                                 verbose_name="GPU type")
    capacity_tier = models.CharField(max_length=16, choices=CapacityTier.choices)
    usd_per_gpu_hour = models.DecimalField("$ per GPU-hour", max_digits=10, decimal_places=4)
    effective_from = models.DateTimeField()

    class Meta:
        ordering = ["gpu_type__name", "capacity_tier", "-effective_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["gpu_type", "capacity_tier", "effective_from"], name="price_rate_unique_start"
            ),
            models.CheckConstraint(condition=Q(usd_per_gpu_hour__gte=0), name="price_rate_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.gpu_type} {self.capacity_tier} ${self.usd_per_gpu_hour}/GPU-h from {self.effective_from:%Y-%m-%d}"

    def clean(self) -> None:
        """Said on the field (the check constraint alone gave the admin form "Constraint … is
        violated" above the form)."""
        if self.usd_per_gpu_hour is not None and self.usd_per_gpu_hour < 0:
            raise ValidationError({"usd_per_gpu_hour": f"{self.usd_per_gpu_hour} is negative: a price is 0 or more"})
        self._check_horizon()
        # One price per GPU type, tier and start (the unique constraint), said on the start and
        # naming the price to change (the constraint said it on no field).
        if self.gpu_type_id is None or not self.capacity_tier or self.effective_from is None:
            return
        same = PriceRate.objects.filter(gpu_type_id=self.gpu_type_id, capacity_tier=self.capacity_tier,
                                        effective_from=self.effective_from)
        other = (same.exclude(pk=self.pk) if self.pk is not None else same).values_list("pk", flat=True).first()
        if other is not None:
            at = self.effective_from.astimezone(UTC) if self.effective_from.tzinfo else self.effective_from
            raise ValidationError({"effective_from": (
                f"{self.gpu_type.name} {self.capacity_tier} already has a price from {at:%Y-%m-%d %H:%M} UTC: change "
                f"that one (id {other}), or start this one at another time")})

    def _check_horizon(self) -> None:
        """A start given (a new rate's, or one moved) is at most `PRICE_HORIZON_YEARS` ahead.
        A rate stored beyond it before the rule keeps its start until it is moved, so it can
        still be corrected."""
        start = self.effective_from
        if start is None or start.tzinfo is None:  # a naive start is refused on the field already
            return
        if self.pk is not None and PriceRate.objects.filter(pk=self.pk, effective_from=start).exists():
            return
        now = timezone.now()
        latest = price_horizon(now)
        if start > latest:
            raise ValidationError({"effective_from": (
                f"{start.astimezone(UTC):%Y-%m-%d %H:%M} UTC is more than {PRICE_HORIZON_YEARS} years ahead: a price "
                f"starts at most {PRICE_HORIZON_YEARS} years from now (by {latest.astimezone(UTC):%Y-%m-%d %H:%M} "
                "UTC); was the year mistyped?")})


class Node(models.Model):
    """A GPU node as the control plane knows it: inventory, topology, health, agent lease."""

    # One line of visible text each (models/names.py): a control character in a name reached
    # every page, log and terminal that printed it (until 5 Dec the admin and the agent's
    # registration took them).
    name = models.CharField(max_length=128, unique=True, validators=[node_name])
    pool = models.CharField(max_length=64, validators=[visible_name])
    gpu_type = models.ForeignKey(GpuType, on_delete=models.PROTECT, related_name="nodes", verbose_name="GPU type")
    gpu_count = models.PositiveIntegerField("GPUs")
    cpus = models.PositiveIntegerField("CPUs")
    memory_gb = models.PositiveIntegerField("memory (GB)")
    leaf_switch = models.CharField(max_length=64, validators=[visible_name])
    spine = models.CharField(max_length=64, validators=[visible_name])
    capacity_tier = models.CharField(max_length=16, choices=CapacityTier.choices, default=CapacityTier.ON_DEMAND)
    state = models.CharField(max_length=16, choices=NodeState.choices, default=NodeState.READY)
    unschedulable = models.BooleanField(
        default=False,
        help_text="Set by cordon and drain, cleared by uncordon: the operator's wish, which outlives the node "
        "going down and coming back (it returns cordoned, not ready).",
    )
    agent_lease_expires_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat_at = models.DateTimeField(null=True, blank=True)
    # sha256 of the per-node agent token; the token itself is shown once at registration.
    agent_token_hash = models.CharField(max_length=64, blank=True)
    simulated = models.BooleanField(default=False)
    # When it left the fleet (state `retired`): capacity and idle cost end here.
    retired_at = models.DateTimeField(null=True, blank=True)
    # What its agent declared at its last registration (services/agent_protocol.register), which
    # an admin's edit may not contradict (services/nodes.gpu_type_refusal, gpu_count_refusal):
    # its GPUs' type ("" when the agent named none, or none is on record: migration 0045), how
    # many, and when; null for a node no agent has registered.
    agent_gpu_type = models.CharField("GPU type its agent declared", max_length=64, blank=True, default="",
                                      db_default="")
    agent_gpu_count = models.PositiveIntegerField("GPUs its agent declared", null=True, blank=True)
    agent_registered_at = models.DateTimeField("its agent's last registration", null=True, blank=True)

    class Meta:
        ordering = ["pool", "leaf_switch", "name"]
        constraints = [
            models.CheckConstraint(condition=Q(gpu_count__gt=0), name="node_has_gpus"),
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """The API's bounds, said on the field (the check constraint alone gave the admin form
        "Constraint … is violated" above the form)."""
        if self.gpu_count is not None and not 1 <= self.gpu_count <= MAX_NODE_GPUS:
            raise ValidationError({"gpu_count": f"{self.gpu_count} is outside 1–{MAX_NODE_GPUS}: a node has at least one GPU"})
