"""A team in no cohort borrows and lends nothing, and from this release leaving a cohort clears
its quotas' borrowing and lending limits, each recorded (services/quotas.py,
clear_limits_out_of_cohort). The quotas of teams that left before kept theirs with no word:
they are cleared here the same way, each with its quota.changed event (actor `migration:0034`),
so the API, the admin and `qm quotas` agree and a team joining a cohort later starts with none.
Reversing it leaves the quotas as they are (the events keep what each had)."""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.utils import timezone

WHY = (" (team {team} is in no cohort: it borrows and lends nothing, so its quota keeps no borrowing or lending "
       "limit; set them again once it joins a cohort)")


def _shown(value: Any) -> str:
    return "none" if value is None else str(value)


def clear(apps: Any, schema_editor: Any) -> None:
    Quota = apps.get_model("controlplane", "Quota")
    Event = apps.get_model("controlplane", "Event")
    now = timezone.now()
    events = []
    quotas = (Quota.objects.filter(team__cohort__isnull=True)
              .exclude(borrowing_limit__isnull=True, lending_limit__isnull=True)
              .select_related("team", "gpu_type").order_by("pk"))
    for quota in quotas:
        before = {"id": quota.pk, "team": quota.team.name, "gpu_type": quota.gpu_type.name,
                  "nominal_gpus": quota.nominal_gpus, "borrowing_limit": quota.borrowing_limit,
                  "lending_limit": quota.lending_limit}
        moved = ", ".join(f"{label} {_shown(before[key])} → none" for key, label in
                          (("borrowing_limit", "borrowing limit"), ("lending_limit", "lending limit"))
                          if before[key] is not None)
        events.append(Event(
            created_at=now, kind="quota.changed", actor="migration:0034", reason="QuotaChanged",
            message=(f"Quota of {quota.team.name} on {quota.gpu_type.name} changed: {moved}"
                     + WHY.format(team=quota.team.name))[:1000],
            team_id=quota.team_id,
            data={"before": before, "after": {**before, "borrowing_limit": None, "lending_limit": None}},
        ))
    Quota.objects.filter(pk__in=[e.data["before"]["id"] for e in events]).update(borrowing_limit=None,
                                                                                 lending_limit=None)
    Event.objects.bulk_create(events)


class Migration(migrations.Migration):

    dependencies = [
        ("controlplane", "0033_quota_drop_cpu_memory"),
    ]

    operations = [
        migrations.RunPython(clear, migrations.RunPython.noop),
    ]
