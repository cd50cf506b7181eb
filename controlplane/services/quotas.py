"""Quota changes and their audit trail: every quota created, changed or deleted, through the API
or the admin UI, is recorded as a quota.changed event with the quota before and after."""

from __future__ import annotations

from typing import Any

from controlplane.choices import EventKind
from controlplane.models import Event, Quota
from controlplane.services.transitions import event_fields


def quota_record(quota: Quota) -> dict[str, Any]:
    """The quota as the API shows it (QuotaSerializer's fields): what an event's before and
    after hold."""
    return {
        "id": quota.pk, "team": quota.team.name, "gpu_type": quota.gpu_type.name,
        "nominal_gpus": quota.nominal_gpus, "borrowing_limit": quota.borrowing_limit,
        "lending_limit": quota.lending_limit, "nominal_cpus": quota.nominal_cpus,
        "nominal_memory_gb": quota.nominal_memory_gb,
    }


def record_quota_change(quota: Quota, verb: str, before: dict[str, Any] | None, actor: str) -> Event:
    """`verb`: created, changed or deleted. Call it in the transaction that writes the quota
    (for a deletion, before deleting it)."""
    after = quota_record(quota) if verb != "deleted" else None
    fields = event_fields(
        EventKind.QUOTA_CHANGED, actor, reason=f"Quota{verb.title()}",
        message=f"Quota of {quota.team.name} on {quota.gpu_type.name} {verb}"
        + (f": nominal {quota.nominal_gpus} GPUs" if after else ""),
        data={"before": before, "after": after},
    )
    return Event.objects.create(**{**fields, "team_id": quota.team_id})
