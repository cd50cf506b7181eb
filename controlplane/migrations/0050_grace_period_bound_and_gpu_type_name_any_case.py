"""A priority class's grace period is at most an hour (models/quotas.MAX_GRACE_PERIOD_S), and a
GPU type's name is unique whatever its case; from this release the API and the admin refuse
either (PriorityClass.clean, GpuType.clean), and the database holds both.

A class stored with a longer grace period is lowered to the hour here, each with its
config.changed event (actor `migration:0050`, reason PriorityClassChanged), so the trail says
what it had; only stops ordered from then on get the hour (a stop ordered before keeps the
deadline it was given). GPU types whose names differ only in case cannot be merged here (nodes,
quotas, prices and jobs point at each): the migration then stops before changing anything,
naming them, and an operator renames or deletes one (docs/operations.md) and migrates again.
Reversing it drops the two constraints and leaves the grace periods as they are (the events keep
what each had)."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.models.functions import Lower
from django.utils import timezone

MAX_GRACE_PERIOD_S = 3600  # models/quotas.MAX_GRACE_PERIOD_S when this was written
AUDITED = ("name", "value", "description", "preemptible", "may_preempt_lower", "grace_period_s", "min_runtime_s",
           "preemption_budget", "budget_window_s", "default_runtime_limit_s", "max_runtime_limit_s")


def _span(seconds: int) -> str:
    if seconds >= 86400 and seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds} s"


def refuse_gpu_types_apart_by_case(apps: Any, schema_editor: Any) -> None:
    GpuType = apps.get_model("controlplane", "GpuType")
    by_lower: dict[str, list[tuple[int, str]]] = {}
    for pk, name in GpuType.objects.order_by("pk").values_list("pk", "name"):
        by_lower.setdefault(name.lower(), []).append((pk, name))
    alike = [types for types in by_lower.values() if len(types) > 1]
    if alike:
        listed = "; ".join(" and ".join(f"{name} (id {pk})" for pk, name in types) for types in alike)
        raise RuntimeError(
            f"GPU types whose names differ only in case: {listed}. From migration 0050 a GPU type's name is unique "
            "whatever its case (jobs name their types exactly, so such names are mistaken for each other). Keep "
            "one of each: delete the other if nothing uses it, or move its nodes, quotas and prices to the one "
            "kept, then run migrate again (docs/operations.md, migration 0050). Nothing was changed.")


def lower_long_grace_periods(apps: Any, schema_editor: Any) -> None:
    PriorityClass = apps.get_model("controlplane", "PriorityClass")
    Event = apps.get_model("controlplane", "Event")
    now = timezone.now()
    events = []
    for pc in PriorityClass.objects.filter(grace_period_s__gt=MAX_GRACE_PERIOD_S).order_by("pk"):
        before = {"id": pc.pk, **{name: getattr(pc, name) for name in AUDITED}}
        events.append(Event(
            created_at=now, kind="config.changed", actor="migration:0050", reason="PriorityClassChanged",
            message=(f"Priority class {pc.name} changed: grace period {_span(pc.grace_period_s)} → "
                     f"{_span(MAX_GRACE_PERIOD_S)} (a grace period is at most an hour from migration 0050: a stopped "
                     "job keeps its GPUs that long after its SIGTERM)")[:1000],
            data={"model": "priorityclass", "before": before, "after": {**before, "grace_period_s": MAX_GRACE_PERIOD_S}},
        ))
    PriorityClass.objects.filter(pk__in=[e.data["before"]["id"] for e in events]).update(
        grace_period_s=MAX_GRACE_PERIOD_S)
    Event.objects.bulk_create(events)


class Migration(migrations.Migration):

    dependencies = [
        ("controlplane", "0049_scheduler_policy_permission"),
    ]

    operations = [
        migrations.RunPython(refuse_gpu_types_apart_by_case, migrations.RunPython.noop),
        migrations.RunPython(lower_long_grace_periods, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="gputype",
            constraint=models.UniqueConstraint(Lower("name"), name="gpu_type_name_unique_any_case",
                                               violation_error_message="A GPU type has this name but for its case."),
        ),
        migrations.AlterField(
            model_name="priorityclass",
            name="grace_period_s",
            field=models.PositiveIntegerField(
                default=30, verbose_name="grace period (s)",
                help_text="A stopped job's time from SIGTERM to SIGKILL, to save a checkpoint and exit: at most "
                          "3600 s (an hour)."),
        ),
        migrations.AddConstraint(
            model_name="priorityclass",
            constraint=models.CheckConstraint(condition=models.Q(("grace_period_s__lte", 3600)),
                                              name="priority_class_grace_period_within_an_hour"),
        ),
    ]
