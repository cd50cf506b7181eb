"""Exit codes of signal deaths in one convention (services/exit_codes.py): a job stored with -N
(the agent saw its process killed by signal N) now reads 128 + N, as the jobs a shell reported
already did, so `exit_code=137` finds every SIGKILL in the history. Reversing it leaves them."""

from __future__ import annotations

from typing import Any

from django.db import migrations
from django.db.models import F, Value


def to_shell_convention(apps: Any, schema_editor: Any) -> None:
    Job = apps.get_model("controlplane", "Job")
    Job.objects.filter(exit_code__gte=-64, exit_code__lte=-1).update(exit_code=Value(128) - F("exit_code"))


class Migration(migrations.Migration):
    dependencies = [("controlplane", "0034_quota_limits_cleared_out_of_cohort")]

    operations = [migrations.RunPython(to_shell_convention, migrations.RunPython.noop)]
